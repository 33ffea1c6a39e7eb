"""The Completions bench's `--ledger`: ours on the embedded default's SQLite file, or on a
PostgreSQL database of its own, made for ours' side and dropped after with its key file."""
import argparse
import asyncio
from pathlib import Path

import asyncpg
import pytest

import cluster.embedded
from bench.completions_overhead import BENCH_DATABASE, ours_ledger_url, remove_bench_ledger
from ledger.store.pg_admin import ADMIN_DSN


async def database_exists(name: str) -> bool:
    connection = await asyncpg.connect(ADMIN_DSN, timeout=5)
    try:
        return bool(await connection.fetchval("SELECT count(*) FROM pg_database WHERE datname = $1", name))
    finally:
        await connection.close()


@pytest.fixture
def key_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(cluster.embedded, "REPO_ROOT", tmp_path / "repo")
    return tmp_path / "repo" / "var"


def keep_a_key(url: str) -> Path:
    path = cluster.embedded.key_file(url)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("acs-key")
    return path


def test_on_sqlite_ours_gets_the_embedded_defaults_file_and_its_key_goes_after(
        tmp_path: Path, key_folder: Path) -> None:
    args = argparse.Namespace(ledger="sqlite", admin_dsn=ADMIN_DSN)
    url = ours_ledger_url(args, tmp_path)
    assert url == f"sqlite+aiosqlite:///{tmp_path / 'acs.db'}"
    key = keep_a_key(url)
    remove_bench_ledger(args, tmp_path)
    assert not key.exists()


async def test_on_postgresql_ours_gets_a_new_database_that_goes_after_with_its_key(
        tmp_path: Path, key_folder: Path) -> None:
    args = argparse.Namespace(ledger="postgresql", admin_dsn=ADMIN_DSN)
    # The bench's helpers run an event loop of their own: off this test's loop, in a thread.
    url = await asyncio.to_thread(ours_ledger_url, args, tmp_path)
    assert url.startswith("postgresql+asyncpg://") and url.endswith(f"/{BENCH_DATABASE}")
    assert await database_exists(BENCH_DATABASE)
    key = keep_a_key(url)
    await asyncio.to_thread(remove_bench_ledger, args, tmp_path)
    assert not key.exists()
    assert not await database_exists(BENCH_DATABASE)
