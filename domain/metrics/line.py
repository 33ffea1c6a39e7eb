"""The per-key lines as this process sees them: how many of its requests wait and run.

A wrapper around the line's backend (memory or Redis), so the count costs no call
to Redis at a scrape. With several ingress replicas, each counts its own requests
(a scrape labels them with the replica that answered it).
"""
from __future__ import annotations

import contextlib
from collections import Counter
from typing import AsyncIterator, Iterator

from domain.traffic.line import KeyLine, LineCounts

WAITING, RUNNING = "waiting", "running"


class MeteredKeyLine:
    def __init__(self, inner: KeyLine) -> None:
        self.inner = inner
        self.max_running = getattr(inner, "max_running", None)
        self.max_waiting = getattr(inner, "max_waiting", None)
        self._counts: dict[str, Counter[str]] = {WAITING: Counter(), RUNNING: Counter()}

    @contextlib.asynccontextmanager
    async def place(self, key_id: str) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as places:
            with self._counted(WAITING, key_id):
                await places.enter_async_context(self.inner.place(key_id))
            with self._counted(RUNNING, key_id):
                yield

    async def counts(self, key_id: str) -> LineCounts:
        return await self.inner.counts(key_id)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def total(self, state: str) -> int:
        """This process's requests in that state, over every key."""
        return sum(self._counts[state].values())

    def longest(self, state: str) -> int:
        """The most requests of one key in that state."""
        return max(self._counts[state].values(), default=0)

    @contextlib.contextmanager
    def _counted(self, state: str, key_id: str) -> Iterator[None]:
        counts = self._counts[state]
        counts[key_id] += 1
        try:
            yield
        finally:
            counts[key_id] -= 1
            if not counts[key_id]:
                del counts[key_id]  # keys come and go: keep only those with requests here
