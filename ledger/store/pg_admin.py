"""Making and dropping PostgreSQL databases, for tests and benches."""
from __future__ import annotations

import os

import asyncpg

# The server the tests and the benches make their databases on (an asyncpg DSN of a database to
# connect to while making them).
ADMIN_DSN = os.environ.get("ACS_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


async def _admin(admin_dsn: str, *statements: str) -> None:
    connection = await asyncpg.connect(admin_dsn, timeout=5)
    try:
        for statement in statements:
            await connection.execute(statement)
    finally:
        await connection.close()


async def recreate_database(admin_dsn: str, name: str) -> str:
    """A new, empty database `name` (any old one is dropped); returns its asyncpg DSN."""
    await _admin(admin_dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
    return admin_dsn.rsplit("/", 1)[0] + f"/{name}"


async def drop_database(admin_dsn: str, name: str) -> None:
    await _admin(admin_dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def sqlalchemy_url(dsn: str, database: str) -> str:
    base = dsn.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://", 1)
    return f"{base}/{database}"
