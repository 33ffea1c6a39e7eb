"""SQLAlchemy Core statements run on a pooled connection's own driver (the ledger's hot paths).

Each statement is compiled once per dialect. On asyncpg it runs as a prepared
statement and takes Python's values as they are; on aiosqlite the types'
conversions that SQLAlchemy's own execution would apply run here (UUIDs as hex,
UTC datetimes as text, and back), so rows and parameters are the same on both
paths. ledger/store/pooled_driver.py and ledger/store/sqlite_driver.py hand out the connections.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect
from sqlalchemy.ext.asyncio import AsyncEngine

from ledger.store import pooled_driver
from ledger.store import sqlite_driver
from ledger.store.db import bound_engine

_PG_DIALECT = asyncpg_dialect()


@dataclass(frozen=True)
class Compiled:
    """One statement compiled for a driver: its SQL, its parameters in order with their
    defaults, and the types' conversions SQLAlchemy would apply on the way in and out."""

    sql: str
    names: tuple[str, ...]
    defaults: dict
    binds: tuple[Callable[[Any], Any] | None, ...]
    results: tuple[Callable[[Any], Any] | None, ...]

    @classmethod
    def of(cls, statement: Any, dialect: Any) -> "Compiled":
        compiled = statement.compile(dialect=dialect)
        names = tuple(compiled.positiontup)
        processors = compiled._bind_processors
        results = tuple(column[3]._cached_result_processor(dialect, None) for column in compiled._result_columns)
        return cls(str(compiled), names, compiled.params, tuple(processors.get(name) for name in names), results)

    def values(self, params: dict) -> list:
        return [params[name] if name in params else self.defaults[name] for name in self.names]

    def converted_values(self, params: dict) -> list:
        return [value if bind is None or value is None else bind(value)
                for bind, value in zip(self.binds, self.values(params))]

    def converted_row(self, row: Any) -> tuple:
        return tuple(value if convert is None else convert(value) for convert, value in zip(self.results, row))


# Statements are module constants, so their ids are stable for the process's life.
_PG_COMPILED: dict[int, Compiled] = {}
_SQLITE_COMPILED: dict[int, Compiled] = {}


async def fetch_asyncpg(driver: Any, statement: Any, params: dict) -> list:
    """The statement's rows on an asyncpg connection (asyncpg's records)."""
    compiled = _PG_COMPILED.get(id(statement))
    if compiled is None:
        compiled = _PG_COMPILED[id(statement)] = Compiled.of(statement, _PG_DIALECT)
    return await driver.fetch(compiled.sql, *compiled.values(params))


async def fetch_aiosqlite(driver: Any, dialect: Any, statement: Any, params: dict) -> list[tuple]:
    """The statement's rows on an aiosqlite connection, converted as SQLAlchemy would."""
    compiled = _SQLITE_COMPILED.get(id(statement))
    if compiled is None:
        compiled = _SQLITE_COMPILED[id(statement)] = Compiled.of(statement, dialect)
    rows = await driver.execute_fetchall(compiled.sql, compiled.converted_values(params))
    return [compiled.converted_row(row) for row in rows]


def drives(engine: AsyncEngine) -> bool:
    """Whether the engine's connections can run statements here: asyncpg or aiosqlite."""
    return engine.dialect.name == "postgresql" or sqlite_driver.drives(engine)


def driven_engine(sessions: Any) -> AsyncEngine | None:
    """The engine a session factory is bound to, where its driver runs statements here; else None."""
    engine = bound_engine(sessions)
    return engine if engine is not None and drives(engine) else None


async def read(engine: AsyncEngine, statement: Any, params: dict) -> list:
    """One read statement on its own, on a connection of the engine's pool (see `drives`)."""
    if engine.dialect.name == "postgresql":
        return await pooled_driver.one_statement(engine, lambda driver: fetch_asyncpg(driver, statement, params))
    return await sqlite_driver.one_statement(
        engine, lambda driver: fetch_aiosqlite(driver, engine.dialect, statement, params))
