"""The newest state of each thing that grows in this process, written in batches.

A Loom Node's text and a Playground Run's Completion grow at every token, but the ledger need
not be written at each one: every WRITE_EVERY_S one transaction writes the newest state of
every thing that grew since the last write. Eight growing things then cost one write
transaction a tick, not eight, which the engine's steps would feel on the embedded SQLite
ledger (bench/loom.py).

A skipped write is never a loss: each write carries the whole state so far, and a thing's end
writes its last state with its work row's answer (so `forget` drops what waits). The writes are
conditioned on the thing still growing under its attempt, by the ledger's own writers.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable, Generic, Hashable, TypeVar

log = logging.getLogger("acs.background")

WRITE_EVERY_S = 0.1

Item = TypeVar("Item")


class NewestWrites(Generic[Item]):
    """One writer for every growing thing of one kind in the process."""

    def __init__(self, write_all: Callable[[list[Item]], Awaitable[Any]], what: str,
                 every_s: float = WRITE_EVERY_S) -> None:
        self._write_all, self._what, self._every_s = write_all, what, every_s
        self._newest: dict[Hashable, Item] = {}
        self._task: asyncio.Task | None = None

    def offer(self, key: Hashable, item: Item) -> None:
        """`item` is the newest state of `key` (a thing and its attempt): the next batch writes it."""
        self._newest[key] = item
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._write_while_growing())

    def forget(self, key: Hashable) -> None:
        """The thing ended: its end writes its last state, so what waits need not be."""
        self._newest.pop(key, None)

    async def _write_while_growing(self) -> None:
        while self._newest:
            batch, self._newest = list(self._newest.values()), {}
            try:
                await self._write_all(batch)
            except Exception:  # noqa: BLE001 - the next write, or the thing's end, makes it good
                log.exception("writing %d growing %s failed", len(batch), self._what)
            await asyncio.sleep(self._every_s)
