"""Apply the ledger's migrations from code: `await upgrade(url)`.

`python -m cluster.migrate` upgrades the database of the settings (ACS_DATABASE_URL).
"""
from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection

from ledger.store.db import is_sqlite, make_engine

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
# Any fixed number: it names the lock that serializes concurrent upgrades.
PG_MIGRATION_LOCK = 0x4C454447  # "LEDG"


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    # ConfigParser reads % as interpolation: a password may hold one.
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


async def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database at `url` to `revision`; safe to call at every start."""
    engine = make_engine(url)
    if is_sqlite(url):
        # Take SQLite's write lock at BEGIN: two starts then migrate in turn.
        engine = engine.execution_options(sqlite_begin="IMMEDIATE")
    try:
        async with engine.begin() as connection:
            await connection.run_sync(_upgrade_on, alembic_config(url), revision)
    finally:
        await engine.dispose()


def _upgrade_on(connection: Connection, config: Config, revision: str) -> None:
    if connection.dialect.name == "postgresql":
        # Replicas starting together must not create the same tables twice.
        connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({PG_MIGRATION_LOCK})")
    config.attributes["connection"] = connection
    command.upgrade(config, revision)
