"""The embedded default's Holds and settlements, each a whole transaction in one call to a thread
of its own (one thread per SQLite file), on that thread's own sqlite3 connection.

On aiosqlite each statement of a transaction is a crossing to its thread and back, and the
coroutine goes on only at the event loop's next turn: a Hold kept SQLite's write lock for four
turns of the loop that carries every stream, while the other writers slept in SQLite's busy
handler (1, 2, 5, 10 ... 100 ms). At concurrency 16 the Holds of a wave of new requests reached
the engine one by one, spread over several of its steps. Here the lock is held for the statements
alone, and this process's writers take their turns in the thread, first come, first served.
Writers of other connections and processes still meet at SQLite's lock, with its busy timeout.

`work` is the ledger's own async code (ledger/tokens.py) on counters whose statements never
suspend, so the thread drives its coroutine to the end without an event loop.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import sqlite3
import threading
from typing import Any, Callable, Coroutine, TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine

from ledger.db import SQLITE_BUSY_TIMEOUT_MS, sqlite_begin

T = TypeVar("T")

_writers: dict[str, "SqliteWriter"] = {}
_writers_lock = threading.Lock()


class CutBeforeItsTurn(Exception):
    """The caller went away while the transaction waited for its turn: it ran nothing."""


def drives(engine: AsyncEngine) -> bool:
    """A SQLite file through aiosqlite (an in-memory database is its connection's alone)."""
    database = engine.url.database or ""
    return (engine.dialect.name == "sqlite" and engine.dialect.driver == "aiosqlite"
            and database not in ("", ":memory:") and "mode=memory" not in str(engine.url))


def run_to_end(coroutine: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that never suspends, without an event loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("a statement of the SQLite writer suspended")


class SqliteWriter:
    """One thread and one sqlite3 connection for one SQLite file; transactions in turn."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._thread = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger-sqlite")
        self._connection: sqlite3.Connection | None = None  # used in the thread only

    def _connect(self) -> sqlite3.Connection:
        # The PRAGMAs of ledger.db's own connections; BEGIN and COMMIT are ours (no implicit ones).
        connection = sqlite3.connect(self.path, isolation_level=None, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA foreign_keys=ON")
        connection.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        return connection

    def _transaction(self, begin: str, work: Callable[[sqlite3.Connection], Coroutine[Any, Any, T]],
                     keep: Callable[[T], bool], cut: threading.Event) -> T:
        if cut.is_set():
            raise CutBeforeItsTurn
        if self._connection is None:
            self._connection = self._connect()
        connection = self._connection
        connection.execute(begin)  # waits for the write lock, up to the busy timeout
        try:
            if cut.is_set():  # went away while the lock was taken by another connection
                raise CutBeforeItsTurn
            result = run_to_end(work(connection))
            connection.execute("COMMIT" if keep(result) else "ROLLBACK")
            return result
        finally:
            if connection.in_transaction:
                connection.execute("ROLLBACK")

    async def in_transaction(self, begin: str, work: Callable[[sqlite3.Connection], Coroutine[Any, Any, T]],
                             keep: Callable[[T], bool], on_lost: Callable[[T], None] | None = None) -> T:
        """`work(connection)` between `begin` and COMMIT when `keep(result)`, else ROLLBACK.

        A caller cut before the transaction took the write lock leaves nothing behind. One cut
        later cannot stop it: `on_lost` gets the result that nobody awaits any more, in the loop.
        """
        loop = asyncio.get_running_loop()
        cut = threading.Event()
        done = self._thread.submit(self._transaction, begin, work, keep, cut)
        try:
            return await asyncio.wrap_future(done)
        except asyncio.CancelledError:
            cut.set()
            if on_lost is not None:
                done.add_done_callback(lambda future: _hand_lost(loop, future, on_lost))
            raise


def _hand_lost(loop: asyncio.AbstractEventLoop, future: concurrent.futures.Future, on_lost: Callable) -> None:
    if not future.cancelled() and future.exception() is None:
        loop.call_soon_threadsafe(on_lost, future.result())


def writer_for(engine: AsyncEngine) -> SqliteWriter:
    path = engine.url.database
    with _writers_lock:
        writer = _writers.get(path)
        if writer is None:
            writer = _writers[path] = SqliteWriter(path)
        return writer


async def in_transaction(engine: AsyncEngine, work: Callable[[sqlite3.Connection], Coroutine[Any, Any, T]],
                         keep: Callable[[T], bool], on_lost: Callable[[T], None] | None = None) -> T:
    """SqliteWriter.in_transaction on the engine's file, with the BEGIN its options ask for."""
    begin = sqlite_begin(engine.get_execution_options())
    return await writer_for(engine).in_transaction(begin, work, keep, on_lost)
