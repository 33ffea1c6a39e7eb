"""A pooled SQLite connection driven in aiosqlite's own thread, for the ledger's hot path (ledger/tokens.py).

The embedded default's counterpart of ledger/pooled_driver.py. The connection
comes from the engine's pool (so its size, its timeout and the PRAGMAs of
ledger.db hold), but no SQLAlchemy Connection wraps it. A whole transaction,
BEGIN to COMMIT, runs as one call in the connection's aiosqlite thread: the
event loop is crossed once, not once a statement, and the write lock (the
engine's `sqlite_begin`: IMMEDIATE for the ledger's writes, SQLite's `SELECT
... FOR UPDATE`) is held for the statements' own time. Holding it across turns
of a loop that also streams tokens made the process's other writers wait in
SQLite's busy handler, which sleeps up to 100 ms a try.
"""
from __future__ import annotations

import contextlib
import sqlite3
import threading
from typing import Any, AsyncIterator, Callable, Coroutine, TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import greenlet_spawn

from ledger.db import sqlite_begin

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


async def in_transaction(engine: AsyncEngine, work: Callable[[sqlite3.Connection], Coroutine[Any, Any, T]],
                         keep: Callable[[T], bool]) -> T:
    """`work(connection)` in BEGIN ... COMMIT when `keep(result)`, else ROLLBACK; an error rolls
    back. `work` is a coroutine whose statements run on the connection as they are called, so it
    never suspends (the ledger's statements are shared with PostgreSQL's async driver)."""
    begin = sqlite_begin(engine.get_execution_options())
    # The thread runs on after its caller is cut (a cancel); told so, it rolls back rather than commit.
    cut = threading.Event()
    async with _pooled(engine) as driver:
        try:
            return await _in_thread(driver, _transaction, begin, work, keep, cut)
        except BaseException:
            cut.set()
            raise


async def one_statement(engine: AsyncEngine, work: Callable[[sqlite3.Connection], T]) -> T:
    """`work(connection)`: one statement on its own (SQLite makes it one transaction), a read."""
    async with _pooled(engine) as driver:
        return await _in_thread(driver, work)


async def _in_thread(driver: Any, function: Callable[..., T], *args: Any) -> T:
    # aiosqlite's queue to its thread; it names it private, and it is how each of its own calls runs.
    return await driver._execute(function, driver._conn, *args)


def _transaction(connection: sqlite3.Connection, begin: str, work: Callable[[sqlite3.Connection], Any],
                 keep: Callable[[Any], bool], cut: threading.Event) -> Any:
    connection.execute(begin)
    try:
        result = _to_the_end(work(connection))
    except Exception:
        with contextlib.suppress(Exception):
            connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT" if keep(result) and not cut.is_set() else "ROLLBACK")
    return result


def _to_the_end(coroutine: Coroutine[Any, Any, T]) -> T:
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("the ledger's SQLite work awaited something in aiosqlite's thread")
