"""The embedded default's ledger is SQLite: the API's key check and a
Completion work on it as on PostgreSQL."""
from __future__ import annotations

from typing import Any, AsyncIterator

import pytest_asyncio

from tests.conftest import ApiStack, build_stack
from tests.fakes import FakeEngine
from tests.spec import assert_error, validate


@pytest_asyncio.fixture
async def sqlite_stack(sqlite_sessions: Any) -> AsyncIterator[ApiStack]:
    stack = await build_stack(FakeEngine(), sqlite_sessions)
    yield stack
    await stack.http.aclose()


async def test_a_completion_on_the_sqlite_ledger(sqlite_stack: ApiStack) -> None:
    r = await sqlite_stack.http.post("/v1/completions", headers=sqlite_stack.auth(),
                                     json={"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2})
    assert r.status_code == 200, r.text
    validate(r.json(), "Completion")
    assert r.json()["usage"]["prompt_tokens"] == 4


async def test_a_wrong_key_on_the_sqlite_ledger(sqlite_stack: ApiStack) -> None:
    r = await sqlite_stack.http.get("/v1/models", headers={"Authorization": "Bearer sk-acs-nope"})
    assert_error(r, 401, "invalid_api_key", message="Incorrect API key provided.", param=None)


async def test_health_reads_the_sqlite_database(sqlite_stack: ApiStack) -> None:
    r = await sqlite_stack.http.get("/health")
    validate(r.json(), "Health")
    assert r.json()["wrapper"]["database"]["ok"] is True
