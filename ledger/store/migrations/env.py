"""Alembic's entry point, for the CLI and for `ledger.store.migrate.upgrade`.

`ledger.store.migrate` hands over an open connection in `config.attributes`, because
Alembic's own asyncio.run() cannot run inside a caller's event loop.
"""
from __future__ import annotations

import asyncio
from logging.config import fileConfig
from typing import Any

from alembic import context
from sqlalchemy import pool
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel

import ledger.tables  # noqa: F401  (registers the tables on SQLModel.metadata)
import ledger.work.idempotency  # noqa: F401  (its table too)
from ledger.store.coltypes import UtcDateTime
from ledger.store.db import make_engine

config = context.config
target_metadata = SQLModel.metadata

# Only the CLI reads the ini's logging setup; an application keeps its own.
if config.config_file_name is not None and "connection" not in config.attributes:
    fileConfig(config.config_file_name)


def _url() -> str:
    """The ledger's URL: from `ledger.store.migrate`, or the CLI's `-x url=...`."""
    url = config.get_main_option("sqlalchemy.url") or context.get_x_argument(as_dictionary=True).get("url")
    if not url:
        raise SystemExit("Name the ledger: alembic -x url=postgresql+asyncpg://... upgrade head "
                         "(or run python -m cluster.migrate, which reads ACS_DATABASE_URL).")
    return url


def _render_item(kind: str, obj: Any, _context: Any) -> str | bool:
    # Migrations keep plain SQL types, so they never import application code
    # that may change later.
    if kind == "type" and isinstance(obj, UtcDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def _configure(**kwargs: Any) -> None:
    context.configure(
        target_metadata=target_metadata,
        render_as_batch=True,  # SQLite alters tables by copying them.
        render_item=_render_item,
        compare_type=True,
        # True on SQLite too: ledger.store.db emits BEGIN itself, so DDL is transactional.
        transactional_ddl=True,
        **kwargs,
    )


def run_migrations_offline() -> None:
    _configure(url=_url(), literal_binds=True, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def do_run_migrations(connection: Connection) -> None:
    _configure(connection=connection)
    with context.begin_transaction():
        context.run_migrations()


async def run_async_migrations() -> None:
    engine = make_engine(_url(), poolclass=pool.NullPool)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(do_run_migrations)
            await connection.commit()
    finally:
        await engine.dispose()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        do_run_migrations(connection)
    else:
        asyncio.run(run_async_migrations())


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
