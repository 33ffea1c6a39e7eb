"""A pooled SQLite connection driven by aiosqlite itself, for the ledger's hot reads (the key
check and the spend stop, ledger/driver_sql.py).

The connection comes from the engine's pool (so its size, its timeout and the PRAGMAs of
ledger.db hold), but no SQLAlchemy Connection wraps it: SQLAlchemy's aiosqlite adapter crosses
to aiosqlite's thread four times a statement (cursor, execute, fetch, close), while
`execute_fetchall` crosses once. The hot writes (Holds and their ends) go to the file's writer
thread instead (ledger/sqlite_writer.py).
"""
from __future__ import annotations

import contextlib
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import greenlet_spawn

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


async def one_statement(engine: AsyncEngine, work: Callable[[Any], Awaitable[T]]) -> T:
    """One statement on its own (SQLite makes it one transaction), on a pooled connection: a read."""
    async with _pooled(engine) as driver:
        return await work(driver)
