"""The embedded default's key file (cluster/embedded.py): its owner alone may read it, at every moment.

The file holds a key that spends the local user's tokens. Made by writing
first and setting 0600 after, it was readable by others (umask 022) for a
moment: long enough for another user to open it and keep reading.
"""
from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from domain.settings import Settings
from cluster import embedded
from tests.ledger_fixtures import run_async


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """The most permissive umask: the file's mode must not come from it."""
    previous = os.umask(0)
    yield
    os.umask(previous)


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The mode of the file at each write into it: the key is never in a file others may read."""
    seen: list[int] = []
    real_write = os.write

    def write(fd: int, data: bytes) -> int:
        seen.append(stat.S_IMODE(os.fstat(fd).st_mode))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    return seen


def test_a_new_key_file_is_0600_when_its_first_byte_is_written(tmp_path, loose_umask, writes, monkeypatch):
    opened: list[tuple[int, int]] = []
    real_open = os.open
    path = tmp_path / "var" / "local-api-key"

    def spy_open(file, flags, mode=0o777, *args, **kwargs):
        if Path(file) == path:
            opened.append((flags, mode))
        return real_open(file, flags, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy_open)
    embedded.write_private(path, "sk-acs-secret\n")
    assert opened == [(os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)]  # created 0600, never wider
    assert writes and set(writes) == {0o600}
    assert mode_of(path) == 0o600 and path.read_text() == "sk-acs-secret\n"


def test_a_key_file_that_others_could_read_is_closed_before_the_key_goes_in(tmp_path, loose_umask, writes):
    path = tmp_path / "local-api-key"
    path.write_text("an old, longer key of an earlier start\n")
    path.chmod(0o644)
    embedded.write_private(path, "sk-acs-new\n")
    assert writes and set(writes) == {0o600}
    assert mode_of(path) == 0o600 and path.read_text() == "sk-acs-new\n"  # truncated, too


def test_prepare_ledger_keeps_the_local_key_0600(tmp_path, loose_umask):
    settings = Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'acs.db'}")
    path = tmp_path / "local-api-key"
    key = run_async(embedded.prepare_ledger, settings, path)
    assert key.startswith("sk-acs-") and path.read_text() == key + "\n"
    assert mode_of(path) == 0o600
    path.chmod(0o644)  # as an older start (or a copy) may have left it
    assert run_async(embedded.prepare_ledger, settings, path) == key  # the user exists: the file is kept
    assert mode_of(path) == 0o600


def test_one_key_file_per_ledger():
    assert embedded.key_file(None).name == "local-api-key"
    first, second = embedded.key_file("postgresql+asyncpg://a/db"), embedded.key_file("sqlite+aiosqlite:///b.db")
    assert first != second and first.parent == second.parent == embedded.REPO_ROOT / "var"
