"""Shared fixtures. Expensive things (engines, Ray) start once per session."""
from __future__ import annotations

import os

# Before vLLM or Ray are imported anywhere.
os.environ.setdefault("ACS_PROFILE", "test")
from cluster.ray_env import prepare_ray_environment  # noqa: E402
from deployments.vllm_runtime import prepare_environment  # noqa: E402

prepare_environment(cpu=True)
prepare_ray_environment()

import dataclasses  # noqa: E402
import tempfile  # noqa: E402
import uuid  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, AsyncIterator, Iterator  # noqa: E402

import httpx  # noqa: E402
import pytest  # noqa: E402
import pytest_asyncio  # noqa: E402

from api.app import create_app  # noqa: E402
from domain.inference.clients import LocalEngineClient  # noqa: E402
from domain.metrics.counts import Counts  # noqa: E402
from domain.metrics.tally import ProcessTally  # noqa: E402
from domain.services import Services  # noqa: E402
from cluster.composition import compose  # noqa: E402
from domain.settings import Settings  # noqa: E402
from domain.tokenizers import TokenizerRegistry  # noqa: E402
from domain.traffic.limits import TrafficSettings  # noqa: E402
from deployments.catalog import load_catalog  # noqa: E402
from ledger.store.db import make_engine, session_factory  # noqa: E402
from ledger.accounts.keys import create_api_key, create_user  # noqa: E402
from ledger.store.migrate import upgrade  # noqa: E402
from ledger.store.pg_admin import ADMIN_DSN, recreate_database, sqlalchemy_url  # noqa: E402
from tests.ledger_fixtures import DB_TAG  # noqa: E402

# The loopback SMTP server of the browser tests; serve_instance points the ingress's mail at it.
SMTP_PORT = int(os.environ.get("ACS_TEST_SMTP_PORT", "8125"))


async def fresh_postgres(name: str) -> str:
    """A new, migrated PostgreSQL database; returns its SQLAlchemy URL."""
    name += DB_TAG
    await recreate_database(ADMIN_DSN, name)
    url = sqlalchemy_url(ADMIN_DSN, name)
    await upgrade(url)
    return url


async def new_key(sessions: Any, user_name: str | None = None) -> str:
    async with sessions() as session:
        user = await create_user(session, user_name or f"user-{uuid.uuid4().hex[:8]}")
        _, raw = await create_api_key(session, user.id, "test")
        await session.commit()
    return raw


@dataclass
class ApiStack:
    """An in-process API over one engine: `http` and `openai` reach it."""

    app: Any
    services: Services
    engine: Any
    key: str
    http: httpx.AsyncClient

    def openai(self, **kwargs: Any) -> Any:
        from openai import AsyncOpenAI

        return AsyncOpenAI(base_url="http://api.test/v1", api_key=self.key, http_client=self.http,
                           max_retries=0, **kwargs)

    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def replace_services(self, **changes: Any) -> None:
        """The rest of the test runs on a copy of the services with `changes` (they are frozen): for
        a test that swaps a part once the stack is built. A part that other parts were built with
        (the traffic, which admission holds too) is given to the stack's composition instead."""
        self.services = self.app.state.services = dataclasses.replace(self.services, **changes)


# Loading the Llama 3.1 tokenizer takes seconds: one registry for the session.
SHARED_TOKENIZERS = TokenizerRegistry()
# An in-process stack never takes what serve_instance puts in the environment for the Serve stack's
# ingress: its mail goes to a folder, not to that SMTP server, and its lines and counts stay in the
# process, not in that Redis (where another stack's late flush would land in a test's counts). A
# test that wants Redis names it. The long wait is far off: on a loaded machine a request of one second
# would get the spaced 200 answer instead of its own status; the tests of the long wait set theirs.
TEST_SETTINGS = dict(keepalive_s=0.2, long_wait_s=30.0, engine_timeout_s=5.0, breaker_open_s=60.0,
                     smtp_url=None, mail_outbox=Path(tempfile.gettempdir()) / f"acs-test-outbox{DB_TAG}",
                     redis_url=None)


async def build_stack(engine: Any, sessions: Any, *, composed: dict[str, Any] | None = None,
                      **settings: Any) -> ApiStack:
    """`composed`: more of compose's keywords (a clock, a harvest storage of the test's own)."""
    config = Settings(profile="test", **{**TEST_SETTINGS, **settings})
    catalog = load_catalog("test")
    clients = {model_id: LocalEngineClient(engine) for model_id in catalog.models}
    app = create_app()
    # Without Redis each stack counts in a registry of its own, not the process's: another
    # stack's requests must not land in a test's figures.
    counts = None if config.redis_url else Counts(ProcessTally())
    app.state.services = compose(config, catalog, clients, sessions.kw["bind"], tokenizers=SHARED_TOKENIZERS,
                                 counts=counts, **(composed or {}))
    sessions = app.state.services.sessions
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api.test", timeout=60)
    return ApiStack(app, app.state.services, engine, await new_key(sessions), http)


@pytest_asyncio.fixture(scope="session")
async def pg_sessions() -> AsyncIterator[Any]:
    url = await fresh_postgres("acs_test_api")
    engine = make_engine(url)
    yield session_factory(engine)
    await engine.dispose()


@pytest_asyncio.fixture(scope="session")
async def sqlite_sessions(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('ledger') / 'acs.db'}"
    await upgrade(url)
    engine = make_engine(url)
    yield session_factory(engine)
    await engine.dispose()


@pytest.fixture
def composed() -> dict[str, Any]:
    """What the fake stack's composition takes beside its settings (compose's keywords): a module
    that gives its own clock or harvest storage overrides this fixture."""
    return {}


@pytest_asyncio.fixture
async def fake_stack(sqlite_sessions: Any, pg_sessions: Any, composed: dict[str, Any],
                     request: pytest.FixtureRequest) -> AsyncIterator[ApiStack]:
    """The API over a FakeEngine, on the embedded default's SQLite ledger;
    `@pytest.mark.postgres` puts it on PostgreSQL, for what tests the ledger's
    locks and pool. `@pytest.mark.fake(delay_s=...)` and `@pytest.mark.settings(...)`
    configure the engine and the API, `@pytest.mark.traffic(...)` its traffic limits (TrafficSettings'
    fields); the `composed` fixture, its composition."""
    from tests.fakes import FakeEngine

    fake_marker = request.node.get_closest_marker("fake")
    settings_marker = request.node.get_closest_marker("settings")
    on_postgres = request.node.get_closest_marker("postgres") is not None
    sessions = pg_sessions if on_postgres else sqlite_sessions
    engine = FakeEngine(**(fake_marker.kwargs if fake_marker else {}))
    settings = settings_marker.kwargs if settings_marker else {}
    stack = await build_stack(engine, sessions, composed={**composed, **traffic_of(request)}, **settings)
    yield stack
    await stack.http.aclose()


def traffic_of(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Compose's keywords for the test's `@pytest.mark.traffic(...)`: its own limits, in this process."""
    marker = request.node.get_closest_marker("traffic")
    return {"traffic_settings": TrafficSettings(**marker.kwargs)} if marker else {}


@pytest.fixture(scope="session")
def tiny_engine() -> Any:
    """The real vLLM engine (with vllm-lens) on the tiny test model, in this process."""
    from deployments.vllm_engine import VllmEngine

    model = load_catalog("test").models["tiny-llama"]
    engine = VllmEngine(model.weights_path(), model.vllm_args(), cpu=True)
    yield engine
    engine.shutdown()


@pytest_asyncio.fixture
async def real_stack(tiny_engine: Any, pg_sessions: Any, request: pytest.FixtureRequest) -> AsyncIterator[ApiStack]:
    # A real engine's first forward pass takes seconds on a CPU: lenient waits.
    stack = await build_stack(tiny_engine, pg_sessions, composed=traffic_of(request), long_wait_s=300.0,
                              engine_timeout_s=300.0)
    yield stack
    await stack.http.aclose()


@pytest.fixture(scope="session")
def serve_instance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Ray and Serve on 127.0.0.1, once per session; modules add applications."""
    import ray
    from ray import serve

    from cluster.ray_env import start_local_ray
    from tests.serve_fixtures import PORT, ServeInstance, run_async

    url = run_async(fresh_postgres("acs_test_e2e"))
    # Ray workers inherit this process's environment: the ingress reads these.
    # The ingress keeps its traffic state in Redis, as several replicas would.
    os.environ.update(ACS_DATABASE_URL=url, ACS_REDIS_URL=os.environ.get("ACS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"))
    # The App's mail goes to the browser tests' loopback SMTP server (tests/browser/conftest.py),
    # which may start later (the ledger's outbox retries a mail that found no server); never a real one.
    os.environ["ACS_SMTP_URL"] = f"smtp://127.0.0.1:{SMTP_PORT}"
    # Harvests write their files here, not into the checkout's var/.
    os.environ["ACS_HARVEST_STORAGE"] = str(tmp_path_factory.mktemp("harvests"))
    # A Runner killed in a test is found by its lapsed lease within seconds.
    os.environ.setdefault("ACS_RUNNER_LEASE_S", "4")
    # The cluster's metrics counts, apart from a real platform's on the same Redis, and removed after.
    metrics_prefix = os.environ["ACS_METRICS_REDIS_PREFIX"] = f"acs-test{DB_TAG}-{uuid.uuid4().hex[:8]}:metrics:"
    start_local_ray(num_cpus=2)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": PORT})
        yield ServeInstance(url)
    finally:
        serve.shutdown()
        ray.shutdown()
        _delete_redis_keys(os.environ["ACS_REDIS_URL"], metrics_prefix)


def _delete_redis_keys(url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        for key in client.scan_iter(match=f"{prefix}*"):
            client.delete(key)
    finally:
        client.close()
