"""Ledger databases for tests, on both backends. Import the fixtures you use:

    from tests.ledger_fixtures import db_url, pg_url, sessions  # noqa: F401

`db_url` is parametrized: each test runs on a fresh SQLite file and on a
PostgreSQL database made for this test session (the tests fail without one).
ACS_TEST_PG_ADMIN_URL names the server (an asyncpg DSN with a database to
connect to while creating ours).
"""
from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest
import pytest_asyncio
from sqlalchemy import text
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.store.db import make_engine, session_factory
from ledger.tokens.grants import grant, set_allowance
from ledger.accounts.keys import create_api_key, create_user
from ledger.store.migrate import upgrade
from ledger.store.pg_admin import ADMIN_DSN, drop_database, recreate_database, sqlalchemy_url

# Test sessions that run side by side (one per worktree or helper) set a tag
# so that neither drops the other's databases.
DB_TAG = os.environ.get("ACS_TEST_DB_TAG", "")
PG_TEST_DATABASE = f"acs_test_keys{DB_TAG}"
T = TypeVar("T")


def run_in_thread(function: Callable[..., T], *args: Any) -> T:
    """Run blocking code that calls asyncio.run() away from the test's event loop."""
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = function(*args)
        except BaseException as error:  # handed to the caller below
            result["error"] = error

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


def command_line(config: Any, capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """run(*argv): the admin command line on `config`, as (exit code, stdout, stderr)."""
    from cluster.admin_cli import commands as admin

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = run_in_thread(admin.main, list(argv), config)  # main calls asyncio.run
        out, err = capsys.readouterr()
        return code, out, err

    return run


def run_async(coroutine_function: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
    return run_in_thread(lambda: asyncio.run(coroutine_function(*args)))


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A PostgreSQL database made (and migrated) once for the test session."""
    # No skip without PostgreSQL: the ledger's tests must run on it.
    run_async(recreate_database, ADMIN_DSN, PG_TEST_DATABASE)
    url = sqlalchemy_url(ADMIN_DSN, PG_TEST_DATABASE)
    run_async(upgrade, url)
    yield url
    run_async(drop_database, ADMIN_DSN, PG_TEST_DATABASE)


async def _empty_tables(url: str) -> None:
    from sqlmodel import SQLModel

    import ledger.tables  # noqa: F401 - every table in the metadata

    engine = make_engine(url)
    try:
        async with engine.begin() as connection:
            # The queue rows are the migrations' own (each kind's capacity and order): they stay.
            tables = ", ".join(table.name for table in SQLModel.metadata.sorted_tables if table.name != "work_queues")
            await connection.execute(text(f"TRUNCATE {tables} CASCADE"))
    finally:
        await engine.dispose()


async def empty_ledger(request: pytest.FixtureRequest, tmp_path: Any, pg_url_fixture: str = "pg_url") -> str:
    """A migrated, empty ledger on the backend `request.param` names: a new SQLite file, or the
    session's PostgreSQL database (the fixture `pg_url_fixture`) with every table emptied."""
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"
        await upgrade(url)
        return url
    url = request.getfixturevalue(pg_url_fixture)
    await _empty_tables(url)
    return url


@pytest_asyncio.fixture(params=["sqlite", "postgresql"])
async def db_url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    """A migrated, empty ledger database on each backend."""
    return await empty_ledger(request, tmp_path)


@pytest_asyncio.fixture
async def sessions(db_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    engine = make_engine(db_url)
    yield session_factory(engine)
    await engine.dispose()


async def user_with_tokens(money: Any, allowance: int | None = None, budget: int = 0, key_budget: int = 0) -> tuple[Any, Any]:
    """A User with one key: its allowance, a Budget and the key's own Budget (none when 0)."""
    async with money() as session:
        user = await create_user(session, f"u-{id(object())}-{asyncio.get_running_loop().time()}")
        key, _ = await create_api_key(session, user.id, "k")
        await session.commit()
    async with money() as session:
        await set_allowance(session, user.id, allowance)
    for tokens, key_id in ((budget, None), (key_budget, key.id)):
        if tokens:
            async with money() as session:
                await grant(session, user.id, tokens, key_id=key_id)
    return user.id, key.id
