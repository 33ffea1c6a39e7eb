"""The per-key line of POST /v1/completions.

The spec (Limits, Traffic): at most 16 Completions of one API key run at
once and at most 64 wait; past that, 429 `queue_full` with Retry-After: 5.
"A Completion takes its place when it starts and keeps it until it ends,
also a stream. A waiting Completion holds no tokens and runs in the order it
came. It leaves the line when you close the connection."

This module holds the contract and the in-process backend (the embedded
default's one replica); `line_redis` holds the backend that replicas share.
"""
from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from dataclasses import dataclass, field
from typing import AsyncContextManager, AsyncIterator, Protocol

from domain.traffic.messages import queue_full

MAX_RUNNING = 16
MAX_WAITING = 64


@dataclass(frozen=True)
class LineCounts:
    running: int
    waiting: int


class KeyLine(Protocol):
    def place(self, key_id: str) -> AsyncContextManager[None]:
        """A place in `key_id`'s line, held for the whole request.

        Entering waits, in arrival order, until fewer than `max_running`
        places of the key run, then takes one. It raises `QueueFull` at once
        when `max_waiting` requests of the key already wait. A waiter whose
        task is cancelled (its client went away) leaves the line and holds
        nothing. Exiting (normally, by an exception, or by cancellation)
        frees the place and lets the first waiter in.
        """
        ...

    async def counts(self, key_id: str) -> LineCounts:
        """How many of the key's requests run and wait now."""
        ...

    async def aclose(self) -> None:
        """Stop background work (the Redis backend's wake-up listener)."""
        ...


@dataclass
class _Key:
    running: int = 0
    # A waiter's future is resolved when a leaving runner hands it its place.
    waiters: deque[asyncio.Future[None]] = field(default_factory=deque)


class MemoryKeyLine:
    """The line in this process. A place passes straight from the runner that
    leaves to the first waiter, so a newcomer can never overtake the line."""

    def __init__(self, max_running: int = MAX_RUNNING, max_waiting: int = MAX_WAITING) -> None:
        self.max_running, self.max_waiting = max_running, max_waiting
        self._keys: dict[str, _Key] = {}

    @contextlib.asynccontextmanager
    async def place(self, key_id: str) -> AsyncIterator[None]:
        await self._enter(key_id)
        try:
            yield
        finally:
            self._leave(key_id)

    async def aclose(self) -> None:
        pass

    async def counts(self, key_id: str) -> LineCounts:
        key = self._keys.get(key_id) or _Key()
        return LineCounts(key.running, sum(not f.done() for f in key.waiters))

    async def _enter(self, key_id: str) -> None:
        key = self._keys.setdefault(key_id, _Key())
        if key.running < self.max_running and not key.waiters:
            key.running += 1
            return
        if len(key.waiters) >= self.max_waiting:
            raise queue_full(self.max_running, self.max_waiting)
        waiter = asyncio.get_running_loop().create_future()
        key.waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            self._abandon(key_id, key, waiter)
            raise

    def _abandon(self, key_id: str, key: _Key, waiter: asyncio.Future[None]) -> None:
        if waiter.done() and not waiter.cancelled():
            # The place reached us as the client left: pass it on.
            self._leave(key_id)
            return
        with contextlib.suppress(ValueError):  # a leaver may have dropped it already
            key.waiters.remove(waiter)
        self._forget_if_idle(key_id, key)

    def _leave(self, key_id: str) -> None:
        key = self._keys[key_id]
        while key.waiters:
            waiter = key.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the place changes hands; running stays
                return
        key.running -= 1
        self._forget_if_idle(key_id, key)

    def _forget_if_idle(self, key_id: str, key: _Key) -> None:
        if key.running == 0 and not key.waiters:
            self._keys.pop(key_id, None)
