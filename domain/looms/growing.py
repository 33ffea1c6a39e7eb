"""The texts of the Loom Nodes that grow in this process: told as they grow, written in batches.

Each output of a Node's Completion is told at once to the Loom's streams (`announce`:
domain/looms/news.py, over the feed), so a stream need not wait for the ledger. The ledger
need not be written at each token: every WRITE_EVERY_S one transaction writes the newest
text of every Node that grew since the last write. Eight Nodes then cost one write
transaction a tick, not eight, which the engine's steps would feel on the embedded SQLite
ledger (bench/loom.py).

A skipped write is never a loss: each write carries the whole text so far, and a Node's
end writes its last text with its work row's answer. Every write is conditioned on the
Node still growing under its attempt (`ledger.work.loom_runs`), so a write that comes after
a stop or the Node's end changes nothing.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

log = logging.getLogger("acs.looms")

WRITE_EVERY_S = 0.1


@dataclass(frozen=True)
class Growth:
    loom_id: uuid.UUID
    node_id: uuid.UUID
    attempt: int
    text: str
    used_tokens: int  # prompt and generated tokens so far: what a stop pays


WriteAll = Callable[[list[Growth]], Awaitable[Any]]
Announce = Callable[[Growth], Awaitable[None]]


class GrowingTexts:
    """One writer for every growing Node of the process."""

    def __init__(self, write_all: WriteAll, announce: Announce, every_s: float = WRITE_EVERY_S) -> None:
        self._write_all, self.announce = write_all, announce
        self._every_s = every_s
        self._newest: dict[tuple[uuid.UUID, int], Growth] = {}
        self._task: asyncio.Task | None = None

    def node(self, loom_id: uuid.UUID, node_id: uuid.UUID, attempt: int) -> NodeText:
        return NodeText(self, loom_id, node_id, attempt)

    def offer(self, growth: Growth) -> None:
        self._newest[(growth.node_id, growth.attempt)] = growth
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._write_while_growing())

    def forget(self, node_id: uuid.UUID, attempt: int) -> None:
        """The Node ended: its end writes its last text, so its newest growth need not be."""
        self._newest.pop((node_id, attempt), None)

    async def _write_while_growing(self) -> None:
        while self._newest:
            batch, self._newest = list(self._newest.values()), {}
            try:
                await self._write_all(batch)
            except Exception:  # noqa: BLE001 - the next write, or the Node's end, makes it good
                log.exception("writing %d growing Nodes' texts failed", len(batch))
            await asyncio.sleep(self._every_s)


class NodeText:
    """One Node's text as its stream grows it (`on_progress` of the Completion)."""

    def __init__(self, texts: GrowingTexts, loom_id: uuid.UUID, node_id: uuid.UUID, attempt: int) -> None:
        self._texts, self.loom_id, self.node_id, self.attempt = texts, loom_id, node_id, attempt
        self.text, self.used_tokens = "", 0

    async def offer(self, text: str, _logprobs: Any, used_tokens: int) -> None:
        grew = text != self.text  # a token that is part of a character adds no text: nothing to tell
        self.text, self.used_tokens = text, used_tokens
        growth = Growth(self.loom_id, self.node_id, self.attempt, text, used_tokens)
        self._texts.offer(growth)
        if grew:
            await self._texts.announce(growth)

    def ended(self) -> None:
        self._texts.forget(self.node_id, self.attempt)
