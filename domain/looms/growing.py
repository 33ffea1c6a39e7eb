"""The texts of the Loom Nodes that grow in this process: told as they grow, written in batches.

Each output of a Node's Completion is told at once to the Loom's streams (`announce`:
domain/looms/news.py, over the feed), so a stream need not wait for the ledger, which is
written in batches (domain/growing_writes.py) and conditioned on the Node still growing under
its attempt (`ledger.work.loom_runs`).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from domain.growing_writes import WRITE_EVERY_S, NewestWrites


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
    """One writer for every growing Node of the process (domain/growing_writes.py), and its announcer."""

    def __init__(self, write_all: WriteAll, announce: Announce, every_s: float = WRITE_EVERY_S) -> None:
        self.writes: NewestWrites[Growth] = NewestWrites(write_all, "Nodes' texts", every_s)
        self.announce = announce

    def node(self, loom_id: uuid.UUID, node_id: uuid.UUID, attempt: int) -> NodeText:
        return NodeText(self, loom_id, node_id, attempt)


class NodeText:
    """One Node's text as its stream grows it (`on_progress` of the Completion)."""

    def __init__(self, texts: GrowingTexts, loom_id: uuid.UUID, node_id: uuid.UUID, attempt: int) -> None:
        self._texts, self.loom_id, self.node_id, self.attempt = texts, loom_id, node_id, attempt
        self.text, self.used_tokens = "", 0

    async def offer(self, text: str, _logprobs: Any, used_tokens: int) -> None:
        grew = text != self.text  # a token that is part of a character adds no text: nothing to tell
        self.text, self.used_tokens = text, used_tokens
        growth = Growth(self.loom_id, self.node_id, self.attempt, text, used_tokens)
        self._texts.writes.offer((self.node_id, self.attempt), growth)
        if grew:
            await self._texts.announce(growth)

    def ended(self) -> None:
        self._texts.writes.forget((self.node_id, self.attempt))
