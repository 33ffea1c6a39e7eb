"""What the tests of the warm windows and the spend share: a clock they move, the
Serve boundary faked (a model's handle, the replica counts), and empty tables."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any, AsyncIterator

import pytest_asyncio

from sqlalchemy import delete

from ledger.tokens.tables import SpendSample, SpendStop, SpendStopChange, WarmWindow
from tests.waiting import wait_until


@dataclass
class Clock:
    now: datetime

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


class FakeModelHandle:
    """A model's Serve handle as the floor keeper calls it: `keep_warm.remote(seconds)` gives
    a response that stays open `seconds`, as ModelServer.keep_warm does, and can be cancelled."""

    def __init__(self) -> None:
        self.open = self.most_open = self.calls = self.cancelled = 0
        self.keep_warm = SimpleNamespace(remote=lambda seconds: FakeResponse(self, seconds))


class FakeResponse:
    def __init__(self, handle: FakeModelHandle, seconds: float) -> None:
        self.handle, self.seconds = handle, seconds

    def __await__(self) -> Any:
        return self._stay_open().__await__()

    async def _stay_open(self) -> None:
        handle = self.handle
        handle.calls += 1
        handle.open += 1
        handle.most_open = max(handle.most_open, handle.open)
        try:
            await asyncio.sleep(self.seconds)
        finally:
            handle.open -= 1

    def cancel(self) -> None:
        self.handle.cancelled += 1


@dataclass
class FakeReplicas:
    """Serve's replica counts, as an operator would scale the models."""

    counts: dict[str, int] = field(default_factory=dict)

    async def __call__(self, model_ids: list[str]) -> dict[str, int]:
        return {model_id: self.counts.get(model_id, 0) for model_id in model_ids}


@pytest_asyncio.fixture
async def sessions(fake_stack: Any) -> AsyncIterator[Any]:
    """The fake stack's write sessions, with the operations' tables empty before and after."""
    sessions = fake_stack.services.ledger.write_sessions
    await empty_operations_tables(sessions)
    yield sessions
    await empty_operations_tables(sessions)


async def empty_operations_tables(sessions: Any) -> None:
    """No windows, samples or changes, and the stop off: the stack's database is the session's."""
    async with sessions() as session:
        # The stop's row too: the first change makes it, as on a new database.
        for table in (WarmWindow, SpendSample, SpendStopChange, SpendStop):
            await session.exec(delete(table))
        await session.commit()

