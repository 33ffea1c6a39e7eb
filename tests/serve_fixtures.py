"""One local Ray with Serve for the whole test session, and the applications
that modules put on it (each at its own route prefix, removed when done).

The session fixture `serve_instance` is in conftest.py (a fixture imported
into two modules would start twice).
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from dataclasses import dataclass
from typing import Any, Iterator

from tests.conftest import new_key
from tests.ledger_fixtures import run_in_thread

PORT = int(os.environ.get("ACS_TEST_SERVE_PORT", "8123"))


def runner_process(app_name: str) -> dict:
    """The Runner replica of an application: its process (pid) and identity."""
    from ray import serve

    return serve.get_deployment_handle("runner", app_name=app_name).owner.remote().result(timeout_s=60)


def kill_runner(app_name: str) -> None:
    """SIGKILL the Runner's replica, then wait until Serve has started another."""
    before = runner_process(app_name)
    os.kill(before["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 120
    while True:
        try:
            if runner_process(app_name)["pid"] != before["pid"]:
                return
        except Exception:  # noqa: BLE001 - the dead replica answers errors until it is replaced
            pass
        assert time.monotonic() < deadline, "Serve did not replace the Runner"
        time.sleep(0.5)


def run_async(coroutine: Any) -> Any:
    """Run a coroutine to completion outside any running event loop."""
    return run_in_thread(asyncio.run, coroutine)


async def _key(url: str, user: str) -> str:
    from ledger.store.db import make_engine, session_factory

    engine = make_engine(url)
    try:
        return await new_key(session_factory(engine), user)
    finally:
        await engine.dispose()


def read_ledger(database_url: str, read: Any) -> Any:
    """`await read(session)` on the ledger at `database_url`, from a (synchronous) test."""
    async def run() -> Any:
        from ledger.store.db import make_engine, session_factory

        engine = make_engine(database_url)
        try:
            async with session_factory(engine)() as session:
                return await read(session)
        finally:
            await engine.dispose()
    return run_async(run())


def with_ingress_env(app: Any, env: dict[str, str]) -> Any:
    """The application with `env` in its ingress replica's environment (Ray's runtime_env), beside
    what every process of the session's Ray has."""
    from ray.serve.deployment import Application

    if not env:
        return app
    return Application(_with_env(app._bound_deployment, env))  # the deployment that its routes reach


def with_runner_env(app: Any, env: dict[str, str], code_version: str | None = None) -> Any:
    """The application with `env` in its Runner replica's environment (its grace, ACS_RUNNER_GRACE_S).

    With `code_version`, every deployment carries that code version, as `serve deploy` gives each
    deployment of a config its application's: a second `serve.run` whose `env` differs then replaces
    the Runner alone (its actor options changed), as a config that changes only the Runner's
    environment does. Without it, `serve.run` draws a new version for each deployment and replaces
    all of them, the model's engine too. Serve keeps `version` to itself (`_internal`)."""
    from ray.serve.deployment import Application

    made: dict[int, Application] = {}  # one new Application per old one: the graph shares the models'

    def rebuilt(value: Any) -> Any:
        if isinstance(value, Application):
            if id(value) not in made:
                made[id(value)] = Application(_rebound(value._bound_deployment))
            return made[id(value)]
        if isinstance(value, (list, tuple)):
            return type(value)(rebuilt(item) for item in value)
        if isinstance(value, dict):
            return {key: rebuilt(item) for key, item in value.items()}
        return value

    def _rebound(deployment: Any) -> Any:
        options: dict[str, Any] = {"_init_args": rebuilt(deployment.init_args),
                                   "_init_kwargs": rebuilt(deployment.init_kwargs)}
        if code_version is not None:
            options.update(version=code_version, _internal=True)
        rebound = deployment.options(**options)
        return _with_env(rebound, env) if deployment.name == "runner" else rebound

    return rebuilt(app)


def _with_env(deployment: Any, env: dict[str, str]) -> Any:
    options = {**(deployment.ray_actor_options or {}), "runtime_env": {"env_vars": dict(env)}}
    return deployment.options(ray_actor_options=options)


@dataclass
class ServeInstance:
    """Ray and Serve on 127.0.0.1:PORT over one PostgreSQL ledger."""

    database_url: str

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{PORT}"

    def new_key(self, user: str) -> str:
        return run_async(_key(self.database_url, user))

    def read_ledger(self, read: Any) -> Any:
        """`await read(session)` on the stack's ledger, from a (synchronous) test."""
        return read_ledger(self.database_url, read)

    def clear_sign_in_tries(self) -> None:
        """A fresh minute for the App's 5-tries limits: every test signs in from 127.0.0.1."""
        from sqlalchemy import text

        async def clear(session: Any) -> None:
            await session.execute(text("DELETE FROM access_tries"))
            await session.commit()

        self.read_ledger(clear)

    @contextlib.contextmanager
    def application(self, profile: str, name: str, route_prefix: str,
                    env: dict[str, str] | None = None) -> Iterator[str]:
        """Serve `profile` under `route_prefix` until the block ends; its /v1 address. `env`: settings
        of this application's ingress alone (the App's ACS_PUBLIC_BASE_URL under its prefix)."""
        from ray import serve

        from cluster.serve_app import build_application

        serve.run(with_ingress_env(build_application(profile), env or {}), name=name, route_prefix=route_prefix)
        try:
            yield f"{self.root}{route_prefix.rstrip('/')}/v1"
        finally:
            serve.delete(name)


def holds(serve_instance: ServeInstance, request_id: str) -> list[Any]:
    """The Holds whose request id starts with `request_id` (a Job's, a Node's, a Run's: each of
    its attempts has one)."""
    from sqlmodel import select

    from ledger.tokens.tables import Hold

    async def read(session: Any) -> list[Any]:
        return list((await session.exec(select(Hold).where(Hold.request_id.startswith(request_id)))).all())
    return serve_instance.read_ledger(read)
