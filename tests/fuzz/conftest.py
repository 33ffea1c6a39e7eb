"""The fuzzing tier: the real app over real HTTP, and what each fuzz case checks after its answer.

The app (api.app.create_app over cluster.composition.compose, as build_stack makes it) runs with the
FakeEngine on a fresh PostgreSQL database, served by uvicorn on a free loopback port. uvicorn and the
services live in one thread with an event loop of their own, since asyncpg's connections belong to
the loop that opened them; the tests reach the ledger through that loop too (`LiveServer.call`).

Two Users, one per target: `api` has the API key that the OpenAPI fuzz sends, `app` a password
and the App session that the /account fuzz keeps (signed in once, at start, before any fuzzed
sign-in spends the address's tries). Both have allowances far past any request, and the key's rate
buckets and the App's are loose, so most cases reach validation instead of 429. No Runner runs:
queued work stays queued.

Budget: ACS_FUZZ_EXAMPLES cases per route (small by default, for CI); ACS_FUZZ_SEED the seed (0 by
default, so CI runs the same cases every day; cluster/fuzz.sh draws one and prints it).
"""
from __future__ import annotations

import asyncio
import os
import socket
import threading
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Coroutine, Iterator

import httpx
import pytest
from sqlalchemy import text

from deployments.engine import EngineOutput, EngineRefused, GenerateRequest
from ledger.accounts import passwords
from ledger.tokens.grants import set_allowance
from ledger.accounts.keys import create_api_key
from ledger.accounts.tables import User
from tests.fakes import FakeEngine
from tests.spec import validate

EXAMPLES = int(os.environ.get("ACS_FUZZ_EXAMPLES", "20"))
SEED = int(os.environ.get("ACS_FUZZ_SEED", "0"))
PASSWORD = "fuzzing the App, patiently"
ALLOWANCE = 10**15
# What a refused request must not leave behind: rows of these tables (a Hold only while held). Tables
# that a refusal writes by design are not here: access_tries (the try limits count refusals),
# budget_refusals, idempotency_records (a 4xx answer is kept for its Idempotency-Key), mail_outbox.
LEFTOVER_QUERIES = {
    "held Holds": "SELECT id FROM holds WHERE state = 'held'",
    "work rows": "SELECT id FROM work",
    "Looms": "SELECT id FROM looms",
    "Loom Nodes": "SELECT id FROM loom_nodes",
    "API keys": "SELECT id FROM api_keys",
    "token requests": "SELECT id FROM token_requests",
    "applications": "SELECT id FROM applications",
    "users": "SELECT id FROM users",
    "App sessions": "SELECT id FROM app_sessions",
    "password links": "SELECT id FROM password_links",
    "Grants": "SELECT id FROM grants",
    "Playground Runs": "SELECT id FROM playground_runs",
}

# One round trip for all of them: each case reads them twice.
LEFTOVERS = text(" UNION ALL ".join(f"SELECT '{name}', id::text FROM ({query}) AS t{i}"
                                    for i, (name, query) in enumerate(LEFTOVER_QUERIES.items())))

KNOWN_IDS = text("SELECT kind, id::text FROM work WHERE user_id = :user AND kind IN ('job', 'harvest') "
                 "UNION ALL SELECT 'loom', id::text FROM looms WHERE user_id = :user AND deleted_at IS NULL "
                 "UNION ALL SELECT 'nodes:' || n.loom_id::text, n.id::text FROM loom_nodes n "
                 "JOIN looms l ON l.id = n.loom_id WHERE l.user_id = :user AND l.deleted_at IS NULL "
                 "ORDER BY 2")  # ids are uuid7: in the order they were made, so a seed picks the same ones

# The App User's Looms, each with its Nodes (and whether one grows), oldest first (uuid7).
APP_LOOMS = text("SELECT l.id::text, n.id::text, n.status IN ('queued', 'running') FROM looms l "
                 "JOIN loom_nodes n ON n.loom_id = l.id WHERE l.user_id = :user AND l.deleted_at IS NULL "
                 "ORDER BY 1, 2")

# Oldest first (uuid7), so that a seed picks the same ones.
RUN_IDS = text("SELECT id::text FROM playground_runs WHERE user_id = :user AND deleted_at IS NULL "
               "UNION SELECT DISTINCT group_id::text FROM playground_runs WHERE user_id = :user "
               "AND group_id IS NOT NULL AND deleted_at IS NULL ORDER BY 1")


@dataclass
class FuzzUser:
    id: uuid.UUID
    email: str
    key: str  # its API key
    key_ids: list[str]  # ids of its keys, for the path ids of /account/keys/{key_id}


@dataclass
class Tally:
    """Cases run and answers seen, per target, for the summary at the end."""

    cases: Counter = field(default_factory=Counter)
    statuses: dict[str, Counter] = field(default_factory=dict)

    def count(self, target: str, answer: Any) -> None:
        """One case of `target`, by its answer's status and error code."""
        self.cases[target] += 1
        outcome = str(answer.status_code)
        if answer.status_code >= 400 and header(answer, "content-type").startswith("application/json"):
            error = answer.json().get("error")
            outcome += f" {error.get('code')}" if isinstance(error, dict) else ""
        self.statuses.setdefault(target, Counter())[outcome] += 1


TALLY = Tally()


class LiveServer:
    """The app on 127.0.0.1:<free port>, in a thread with its own event loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.failed: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="fuzz-server", daemon=True)
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"

    def start(self) -> None:
        self.thread.start()
        if not self.ready.wait(120) or self.failed is not None:
            raise RuntimeError("the fuzz server did not start") from self.failed

    def call(self, coroutine: Coroutine[Any, Any, Any], timeout: float = 60) -> Any:
        """Run a coroutine on the server's loop (where its database connections live)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._serve())
        except BaseException as error:  # handed to start()
            self.failed = error
            self.ready.set()

    async def _serve(self) -> None:
        import uvicorn

        self.stack, self.database = await _stack()
        self.api = await _user(self.stack, "fuzz-api")
        self.app = await _user(self.stack, "fuzz-app", extra_keys=2)
        config = uvicorn.Config(self.stack.app, lifespan="off", log_config=None, access_log=False)
        self.server = uvicorn.Server(config)
        serving = asyncio.ensure_future(self.server.serve(sockets=[self.socket]))
        while not self.server.started and not serving.done():
            await asyncio.sleep(0.05)
        self.ready.set()
        await serving
        await self.stack.http.aclose()
        await self.database.dispose()

    def api_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api.key}"}

    def known_ids(self) -> dict[str, list[str]]:
        """The API User's own ids, for path ids that reach past 404: its Jobs, harvests, Looms, and
        each Loom's Nodes (under "nodes:<loom id>")."""
        return self.call(self._known_ids())

    async def _known_ids(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {"job": [], "harvest": [], "loom": []}
        async with self.database.connect() as connection:
            for kind, row_id in await connection.execute(KNOWN_IDS, {"user": self.api.id}):
                found.setdefault(kind, []).append(row_id)
        return found

    def run_ids(self) -> list[str]:
        """The App User's Playground Runs and their groups, for path ids that reach past 404."""
        return self.call(self._run_ids())

    async def _run_ids(self) -> list[str]:
        async with self.database.connect() as connection:
            rows = await connection.execute(RUN_IDS, {"user": self.app.id})
            return [row_id for (row_id,) in rows]

    def app_looms(self, growing: bool = True) -> dict[str, list[str]]:
        """The App User's Looms, each with its Nodes' ids, for path ids that reach past 404; without
        `growing`, only the Looms in which no Node grows (a stream of one that grows would follow it
        for as long as it waits: no Runner runs here)."""
        return self.call(self._app_looms(growing))

    async def _app_looms(self, growing: bool) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        grows: set[str] = set()
        async with self.database.connect() as connection:
            for loom_id, node_id, node_grows in await connection.execute(APP_LOOMS, {"user": self.app.id}):
                found.setdefault(loom_id, []).append(node_id)
                if node_grows:
                    grows.add(loom_id)
        return {loom_id: nodes for loom_id, nodes in found.items() if growing or loom_id not in grows}

    def leftovers(self) -> dict[str, frozenset]:
        """The ids of every table that a refused request must leave as it was."""
        return self.call(self._leftovers())

    async def _leftovers(self) -> dict[str, frozenset]:
        found: dict[str, set] = {name: set() for name in LEFTOVER_QUERIES}
        async with self.database.connect() as connection:
            for name, row_id in await connection.execute(LEFTOVERS):
                found[name].add(row_id)
        return {name: frozenset(ids) for name, ids in found.items()}


@dataclass
class InferenceFakeEngine(FakeEngine):
    """The FakeEngine with Inference's own check of a prompt's token ids: vLLM refuses an id outside the
    vocabulary, negative ones too, with a 400 that the API passes on (domain/completions/validation.py
    leaves that check to it). Without it, ids that never get past Inference reach the API's decoding of
    an echoed prompt, where a negative one is an OverflowError."""

    vocab_size: int = 0

    async def generate(self, request: GenerateRequest) -> AsyncIterator[EngineOutput]:
        ids = list(request.prompt_token_ids)
        outside = [token_id for token_id in ids if not 0 <= token_id < self.vocab_size]
        if outside:
            raise EngineRefused(f"Token id {outside[0]} is out of vocabulary", "prompt")
        async for output in super().generate(request):
            yield output


async def _stack() -> tuple[Any, Any]:
    from domain.traffic.limits import BucketPolicy, TrafficSettings
    from deployments.catalog import load_catalog
    from ledger.store.db import make_engine, session_factory
    from tests.conftest import SHARED_TOKENIZERS, build_stack, fresh_postgres

    vocab_size = SHARED_TOKENIZERS.get(load_catalog("test").models["tiny-llama"]).vocab_size
    database = make_engine(await fresh_postgres("acs_fuzz"))
    loose = BucketPolicy(10**9, 10**6)
    stack = await build_stack(InferenceFakeEngine(vocab_size=vocab_size), session_factory(database),
                              composed={"traffic_settings": TrafficSettings(key_work=loose, key_other=loose,
                                                                            address=loose, app_user=loose)},
                              monthly_allowance=ALLOWANCE)
    return stack, database


async def _user(stack: Any, name: str, extra_keys: int = 0) -> FuzzUser:
    email = f"{name}@example.org"
    async with stack.services.ledger.write_sessions() as session:
        user = User(name=name, email=email, password_hash=passwords.hash_password(PASSWORD),
                    password_set_at=stack.services.clock())
        session.add(user)
        await session.flush()
        keys = [await create_api_key(session, user.id, f"key {i}") for i in range(1 + extra_keys)]
        await set_allowance(session, user.id, ALLOWANCE)
        await session.commit()
    return FuzzUser(user.id, email, keys[0][1], [str(key.id) for key, _ in keys])


@pytest.fixture(scope="session")
def fuzz_server() -> Iterator[LiveServer]:
    server = LiveServer()
    server.start()
    _first_work(server)
    yield server
    server.stop()


def _first_work(server: LiveServer) -> None:
    """A Job, a harvest and a Loom with queued Nodes, so that path ids of real things exist at once."""
    with httpx.Client(base_url=server.url, headers=server.api_headers(), timeout=60) as api:
        for path, body in (("/v1/completion-jobs", {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2}),
                           ("/v1/harvest", {"model": "llama-8b", "prompts": ["The sky is", "Grass is"]}),
                           ("/v1/looms", {"prompt": "The sky is"})):
            answer = api.post(path, json=body)
            assert answer.status_code in (200, 202), answer.text
        loom = answer.json()
        root = loom["nodes"][0]["id"]
        answer = api.post(f"/v1/looms/{loom['id']}/nodes/{root}/branch",
                          json={"model": "llama-8b", "n": 2, "max_tokens": 4})
        assert answer.status_code == 200, answer.text


@pytest.fixture(scope="session")
def app_browser(fuzz_server: LiveServer) -> Iterator[httpx.Client]:
    """The App User's browser: its session and CSRF cookies, made once for the whole run."""
    with httpx.Client(base_url=fuzz_server.url, timeout=60) as browser:
        assert browser.get("/account/csrf").status_code == 204
        answer = browser.post("/account/sign-in", json={"email": fuzz_server.app.email, "password": PASSWORD},
                              headers={"X-CSRF-Token": browser.cookies["acs_csrf"]})
        assert answer.status_code == 200, answer.text
        yield browser


# The checks of every case ------------------------------------------------------------------------
def header(answer: Any, name: str) -> str:
    """A header of an httpx answer or of a schemathesis one (whose headers are lists)."""
    found = {key.lower(): value for key, value in answer.headers.items()}.get(name.lower(), "")
    return found[0] if isinstance(found, list) else found


def check_error_object(answer: Any) -> None:
    """An error answer is the spec's error object, whose request_id is the answer's X-Request-Id."""
    assert header(answer, "content-type").startswith("application/json"), answer.headers
    body = answer.json()
    validate(body, "ErrorResponse")
    assert body["request_id"] == header(answer, "x-request-id"), (body, answer.headers)


def check_nothing_left(before: dict[str, frozenset], after: dict[str, frozenset]) -> None:
    """A refused request made no row: every id after was there before (a Hold may have ended since)."""
    made = {name: sorted(map(str, after[name] - before[name])) for name in before if after[name] - before[name]}
    assert not made, f"a refused request left rows behind: {made}"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not TALLY.cases:
        return
    write = terminalreporter.write_line
    write(f"fuzz: seed {SEED}, ACS_FUZZ_EXAMPLES={EXAMPLES}; cases run: {sum(TALLY.cases.values())}")
    for target, cases in sorted(TALLY.cases.items()):
        statuses = ", ".join(f"{status}: {n}" for status, n in sorted(TALLY.statuses[target].items()))
        write(f"  {target}: {cases} cases ({statuses})")
