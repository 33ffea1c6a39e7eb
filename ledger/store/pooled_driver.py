"""A pooled PostgreSQL connection driven by asyncpg itself, for the ledger's hot path (ledger/tokens/holds.py).

The pool's size and timeout still hold (the connection comes from the engine's
pool), but no SQLAlchemy Connection wraps it: prepared statements go straight to
asyncpg. The checkout's ping is skipped (ledger.store.db.SKIP_PING): the first statement
is the ping, and on a dead connection (a Postgres restart) the work is tried once
more on another connection, pinged. A connection that failed, or whose statement
was cut short by a cancel, never goes back to the pool.
"""
from __future__ import annotations

import contextlib
from typing import Any, Awaitable, Callable, TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import greenlet_spawn

from ledger.store.db import SKIP_PING

T = TypeVar("T")


async def in_transaction(engine: AsyncEngine, work: Callable[[Any], Awaitable[T]], keep: Callable[[T], bool]) -> T:
    """`work(driver)` in BEGIN ... COMMIT when `keep(result)`, else ROLLBACK; an error rolls back."""
    pooled = await _begin(engine)
    driver, drop = pooled.driver_connection, None
    try:
        result = await work(driver)
        await driver.execute("COMMIT" if keep(result) else "ROLLBACK")
        return result
    except BaseException as error:
        if _unusable(error):
            drop = error
        else:
            with contextlib.suppress(Exception):
                await driver.execute("ROLLBACK")
        raise
    finally:
        # Never back to the pool inside a transaction, nor cut short mid-statement.
        if drop is not None or driver.is_in_transaction():
            await greenlet_spawn(pooled.invalidate, drop)
        await greenlet_spawn(pooled.close)


async def one_statement(engine: AsyncEngine, work: Callable[[Any], Awaitable[T]]) -> T:
    """One statement on its own (PostgreSQL makes it one transaction), on a pooled connection.

    Unpinged, as in _begin: on a dead connection it is tried once more on
    another, pinged. `work` must be safe to repeat (a Hold's end is: it
    ends a Hold still held, and the second try finds it ended if the first
    got through).
    """
    for attempt in (0, 1):
        pooled = await _checkout(engine, ping=attempt > 0)
        try:
            return await work(pooled.driver_connection)
        except BaseException as error:
            if not _unusable(error):
                raise
            await greenlet_spawn(pooled.invalidate, error)
            if attempt or not isinstance(error, CONNECTION_ERRORS):
                raise
        finally:
            await greenlet_spawn(pooled.close)
    raise AssertionError("unreachable")


async def _begin(engine: AsyncEngine) -> Any:
    """A connection of the pool (its size and timeout hold) in a transaction, driven by asyncpg itself.

    Its BEGIN is its ping: on a dead connection (a Postgres restart) it fails
    before anything ran, and one more connection is taken, pinged by the pool.
    """
    for attempt in (0, 1):
        pooled = await _checkout(engine, ping=attempt > 0)
        try:
            await pooled.driver_connection.execute("BEGIN")
            return pooled
        except BaseException as error:
            if _unusable(error):
                await greenlet_spawn(pooled.invalidate, error)
            await greenlet_spawn(pooled.close)
            if attempt or not isinstance(error, CONNECTION_ERRORS):
                raise
    raise AssertionError("unreachable")


async def _checkout(engine: AsyncEngine, *, ping: bool) -> Any:
    token = SKIP_PING.set(not ping)
    try:
        return await engine.raw_connection()
    finally:
        SKIP_PING.reset(token)


def _unusable(error: BaseException) -> bool:
    """A connection that failed so, or whose statement was cut short (a cancel), leaves the pool."""
    return isinstance(error, CONNECTION_ERRORS) or not isinstance(error, Exception)


def _connection_errors() -> tuple[type[BaseException], ...]:
    try:
        import asyncpg
    except ImportError:  # SQLite only: the PostgreSQL path never runs
        return (OSError,)
    return (OSError, asyncpg.InterfaceError, asyncpg.PostgresConnectionError)


CONNECTION_ERRORS = _connection_errors()
