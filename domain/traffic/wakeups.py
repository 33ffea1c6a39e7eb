"""Wake-ups of one replica's waiters in the Redis line.

Polling alone is costly: 64 waiters of a full key polling every 20 ms took
half a core of the ingress and a fifth of Redis. So a leaving request
publishes its key on one channel, each replica wakes its first waiter of that
key, and waiters poll only slowly, as a safety net for lost messages,
expired leases and dropped waiters.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger("acs.traffic")


class Wakeups:
    """This replica's waiters of each key in arrival order, and the listener
    that wakes the first of them when another replica frees a place."""

    def __init__(self, redis_client: Any, channel: str, *, listen: bool = True) -> None:
        self._client, self.channel, self._listen = redis_client, channel, listen
        self._waiters: dict[str, dict[str, asyncio.Event]] = {}
        self._listener: asyncio.Task | None = None

    def register(self, key_id: str, ticket: str) -> asyncio.Event:
        if self._listen and (self._listener is None or self._listener.done()):
            self._listener = asyncio.create_task(self._run())
        event = self._waiters.setdefault(key_id, {})[ticket] = asyncio.Event()
        return event

    def unregister(self, key_id: str, ticket: str) -> None:
        waiters = self._waiters.get(key_id, {})
        waiters.pop(ticket, None)
        if not waiters:
            self._waiters.pop(key_id, None)

    def wake_first(self, key_id: str) -> None:
        """One place freed: wake the earliest waiter not woken yet. If it is
        not first in the whole line, a waiter of another replica is, and
        that replica got the same message."""
        for event in self._waiters.get(key_id, {}).values():
            if not event.is_set():
                event.set()
                return

    async def aclose(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            await asyncio.gather(self._listener, return_exceptions=True)
            self._listener = None

    async def _run(self) -> None:
        while True:
            pause = 0.1
            try:
                await self._subscribe_and_wake()
            except Exception:  # Redis went away: waiters still poll meanwhile
                log.warning("line wake-ups lost their subscription; retrying", exc_info=True)
                pause = 1.0
            await asyncio.sleep(pause)

    async def _subscribe_and_wake(self) -> None:
        async with self._client.pubsub(ignore_subscribe_messages=True) as pubsub:
            await pubsub.subscribe(self.channel)
            async for message in pubsub.listen():
                if message["type"] == "message":
                    self.wake_first(message["data"].decode())
