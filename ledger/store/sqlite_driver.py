"""A pooled SQLite connection driven by aiosqlite itself, for the ledger's hot path (ledger/tokens/holds.py).

The embedded default's counterpart of ledger/store/pooled_driver.py. The connection
comes from the engine's pool (so its size, its timeout and the PRAGMAs of
ledger.store.db hold), but no SQLAlchemy Connection wraps it: SQLAlchemy's aiosqlite
adapter crosses to aiosqlite's thread four times a statement (cursor, execute,
fetch, close), while `execute_fetchall` crosses once. The transaction begins
as the engine's `sqlite_begin` option says (IMMEDIATE for the ledger's
writes: the write lock at once, SQLite's `SELECT ... FOR UPDATE`).
"""
from __future__ import annotations

import contextlib
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import greenlet_spawn

from ledger.store.db import sqlite_begin

T = TypeVar("T")


def drives(engine: AsyncEngine) -> bool:
    """Whether this path can take the engine's connections: SQLite through aiosqlite."""
    return engine.dialect.name == "sqlite" and engine.dialect.driver == "aiosqlite"


@contextlib.asynccontextmanager
async def _pooled(engine: AsyncEngine) -> AsyncIterator[Any]:
    """A connection of the engine's pool, as aiosqlite's own. One whose work was cut short (a
    cancel) may still be running its statement in aiosqlite's thread: it never goes back."""
    pooled = await engine.raw_connection()
    cut = None
    try:
        yield pooled.driver_connection
    except BaseException as error:
        if not isinstance(error, Exception):
            cut = error
        raise
    finally:
        if cut is not None:
            await greenlet_spawn(pooled.invalidate, cut)
        await greenlet_spawn(pooled.close)


async def in_transaction(engine: AsyncEngine, work: Callable[[Any], Awaitable[T]], keep: Callable[[T], bool]) -> T:
    """`work(driver)` in BEGIN ... COMMIT when `keep(result)`, else ROLLBACK; an error rolls back."""
    begin = sqlite_begin(engine.get_execution_options())
    async with _pooled(engine) as driver:
        await driver.execute_fetchall(begin)
        try:
            result = await work(driver)
        except Exception:
            with contextlib.suppress(Exception):
                await driver.execute_fetchall("ROLLBACK")
            raise
        await driver.execute_fetchall("COMMIT" if keep(result) else "ROLLBACK")
        return result


async def one_statement(engine: AsyncEngine, work: Callable[[Any], Awaitable[T]]) -> T:
    """One statement on its own (SQLite makes it one transaction), on a pooled connection: a read."""
    async with _pooled(engine) as driver:
        return await work(driver)
