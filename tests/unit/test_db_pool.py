"""A busy database pool: 503 db_pool_exhausted with Retry-After: 1, nothing
ran and no Hold left held, whether the wait was at the key check or at the
Hold; the next request, once a connection is free, succeeds."""
from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import pytest
from sqlalchemy import event
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlmodel import select

from domain import errors
from domain.error_mapping import as_api_error
from ledger.store.db import make_engine, session_factory
from ledger.tokens.tables import Hold
from tests.conftest import build_stack
from tests.fakes import FakeEngine
from tests.spec import assert_error

SKY = {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2}
BUSY = "The API's database was busy. Nothing ran and the API held no tokens."


@asynccontextmanager
async def tiny_pool(pg_sessions: Any) -> AsyncIterator[Any]:
    """An engine on the test database with one connection and a 0.2 s wait for it."""
    url = pg_sessions.kw["bind"].url.render_as_string(hide_password=False)
    engine = make_engine(url, pool_size=1, max_overflow=0, pool_timeout=0.2)
    try:
        yield engine
    finally:
        await engine.dispose()


async def post(stack: Any, **fields: Any) -> Any:
    return await stack.http.post("/v1/completions", headers=stack.auth(), json={**SKY, **fields})


def assert_busy(response: Any) -> None:
    error = assert_error(response, 503, "db_pool_exhausted", message=BUSY, param=None,
                         type="service_unavailable", headers={"Retry-After": "1"})
    assert "x-should-retry" not in response.headers
    assert set(error) == {"message", "type", "param", "code"}


async def holds_of(pg_sessions: Any, request_id: str) -> list[Hold]:
    async with pg_sessions() as session:
        return list((await session.exec(select(Hold).where(Hold.request_id.startswith(request_id)))).all())


def test_the_pool_timeout_maps_to_db_pool_exhausted():
    mapped = as_api_error(PoolTimeout("QueuePool limit of size 1 overflow 0 reached"))
    assert isinstance(mapped, errors.DbPoolExhausted) and mapped.message == BUSY
    assert as_api_error(RuntimeError("boom")) is None


async def busy_then_free(stack, engine, pg_sessions, streamed):
    """A request while the test holds the pool's only connection, then one after."""
    try:
        taken = await engine.connect()
        try:
            response = await post(stack, stream=streamed)
        finally:
            await taken.close()
        assert_busy(response)
        assert await holds_of(pg_sessions, response.headers["x-request-id"]) == []
        # The places in the key's line and at the model were given back too.
        assert (await post(stack, stream=streamed)).status_code == 200
    finally:
        await stack.http.aclose()


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_busy_pool_at_the_key_check(pg_sessions, streamed):
    async with tiny_pool(pg_sessions) as engine:
        stack = await build_stack(FakeEngine(), session_factory(engine))
        await busy_then_free(stack, engine, pg_sessions, streamed)


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_busy_pool_at_the_hold(pg_sessions, streamed):
    """The key check reads on its own pool; the Hold's pool is busy."""
    stack = await build_stack(FakeEngine(), pg_sessions)
    ledger = stack.services.ledger
    async with tiny_pool(pg_sessions) as engine:
        ledger.write_sessions = session_factory(engine)
        await busy_then_free(stack, engine, pg_sessions, streamed)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_the_pool_keeps_every_connection_it_opens_and_opens_at_most_15(backend, pg_sessions, tmp_path):
    """A burst of 15 requests opens 15 connections once: the next burst finds them all open
    (SQLAlchemy's default closed 10 of them again). The 16th waits, as before, for the pool's timeout."""
    if backend == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'acs.db'}"
    else:
        url = pg_sessions.kw["bind"].url.render_as_string(hide_password=False)
    engine = make_engine(url, pool_timeout=0.2)
    opened = []
    event.listen(engine.sync_engine, "connect", lambda connection, _record: opened.append(id(connection)))
    try:
        for _burst in range(2):
            held = [await engine.connect() for _ in range(15)]
            with pytest.raises(PoolTimeout):
                await engine.connect()
            for connection in held:
                await connection.close()
            assert engine.sync_engine.pool.checkedin() == 15
        assert len(opened) == 15
    finally:
        await engine.dispose()
