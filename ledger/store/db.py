"""Async engines and sessions for the ledger: SQLite (embedded) or PostgreSQL.

    engine = make_engine(get_settings().ledger_url())   # domain.settings, above the ledger
    sessions = session_factory(engine)
    async with sessions() as session: ...
"""
from __future__ import annotations

import contextvars
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.util import await_
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlmodel.ext.asyncio.session import AsyncSession

REPO_ROOT = Path(__file__).resolve().parents[2]
# How long a SQLite connection waits for another writer before "database is locked".
SQLITE_BUSY_TIMEOUT_MS = 5000
SQLITE_BEGIN_MODES = ("DEFERRED", "IMMEDIATE", "EXCLUSIVE")
# Set by a caller that checks the connection itself: ledger.tokens.holds' hot path,
# whose BEGIN on a dead connection fails before anything ran, and which then
# takes another connection, pinged.
SKIP_PING: contextvars.ContextVar[bool] = contextvars.ContextVar("acs_skip_ping", default=False)
# The most connections an engine's pool opens: SQLAlchemy's default capacity (5 kept and 10 more
# for a burst). All of them are kept once open: with 16 requests in flight, a burst connection
# was opened and closed again for about every third request (a thread and its SQLite schema read,
# or a PostgreSQL backend), and opening one holds the event loop that carries every stream.
POOL_CONNECTIONS = 15


def default_database_url() -> str:
    """The embedded default: a SQLite file under var/ (make_engine makes the folder).

    The ledger reads no settings: `domain.settings.Settings.ledger_url()` picks
    ACS_DATABASE_URL or this.
    """
    return f"sqlite+aiosqlite:///{REPO_ROOT / 'var' / 'acs.db'}"


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def make_engine(url: str, **kwargs: Any) -> AsyncEngine:
    if "poolclass" not in kwargs:
        kwargs = {"pool_size": POOL_CONNECTIONS, "max_overflow": 0, **kwargs}
    if not is_sqlite(url):
        engine = create_async_engine(url, **kwargs)
        _ping_on_checkout(engine)
        return engine
    _create_sqlite_folder(url)
    engine = create_async_engine(url, **kwargs)
    _configure_sqlite(engine)
    return engine


def bound_engine(sessions: Any) -> AsyncEngine | None:
    """The engine a session factory is bound to (the hot paths run on its pool); None if it has none."""
    engine = getattr(sessions, "kw", {}).get("bind")
    return engine if isinstance(engine, AsyncEngine) else None


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    # expire_on_commit=False: rows stay readable after commit without a new
    # query, which an async session could not do implicitly.
    return async_sessionmaker(engine, class_=AsyncSession, expire_on_commit=False)


def _ping_on_checkout(engine: AsyncEngine) -> None:
    """pool_pre_ping in one round trip: a Postgres restart must not fail the next request.

    The asyncpg dialect's own pre-ping takes three (BEGIN, `;`, ROLLBACK, for
    pgbouncer's transaction mode, which we do not use): on a Hold and its
    settlement that was 6 of 16 round trips. A failed ping makes the pool
    drop the connection and check out another (SQLAlchemy's pessimistic
    disconnect handling with the checkout event).
    """

    @event.listens_for(engine.sync_engine, "checkout")
    def _ping(_dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if SKIP_PING.get():
            return
        try:
            await_(record.driver_connection.fetchrow(";"))
        except Exception as error:
            raise DisconnectionError("the ping failed") from error


def _create_sqlite_folder(url: str) -> None:
    database = make_url(url).database
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def sqlite_begin(execution_options: Any) -> str:
    """The BEGIN that an engine's `sqlite_begin` option asks for (DEFERRED when it names none)."""
    mode = execution_options.get("sqlite_begin", "DEFERRED")
    if mode not in SQLITE_BEGIN_MODES:
        raise ValueError(f"sqlite_begin must be one of {SQLITE_BEGIN_MODES}, not {mode!r}")
    return f"BEGIN {mode}"


def _configure_sqlite(engine: AsyncEngine) -> None:
    """WAL, foreign keys, a busy timeout, and real transactions.

    The sqlite3 driver's legacy mode skips BEGIN before SELECTs, so a read
    followed by a write would not be one transaction. We emit BEGIN ourselves
    (SQLAlchemy's documented recipe). A session whose engine carries the
    execution option `sqlite_begin="IMMEDIATE"` takes the write lock at once,
    the SQLite counterpart of `SELECT ... FOR UPDATE` for the money paths.
    """

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Any) -> None:
        connection.exec_driver_sql(sqlite_begin(connection.get_execution_options()))
