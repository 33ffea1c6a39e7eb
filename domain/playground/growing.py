"""The Completions of the Runs that grow in this process: told as they grow, written in batches.

Each output of a Run's Completion is told at once to the Run's streams (`announce`:
domain/playground/news.py, over the feed): the text of each choice so far, so a stream need not
wait for the ledger. The ledger is not written at each token: every WRITE_EVERY_S one
transaction writes the newest state of every Run that grew since the last write, as for Loom
Nodes (domain/looms/growing.py). That state is taken from the Run's assembly when it is
written, not at each output, so a Run with log probabilities does not build its whole choices
at every token.

A skipped write is never a loss: each write carries the whole Completion so far, and a Run's end
writes its last state with its work row's answer. Every write is conditioned on the Run still
growing under its attempt (`ledger.work.runs`), so a write after a stop or the Run's end changes
nothing.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Awaitable, Callable

from domain.completions.assembly import CompletionAssembly
from domain.playground.news import TextsSoFar
from ledger.work.runs import RunGrowth

log = logging.getLogger("acs.playground")

WRITE_EVERY_S = 0.1

WriteAll = Callable[[list[RunGrowth]], Awaitable[Any]]
Announce = Callable[[TextsSoFar], Awaitable[None]]


def growth_of(run_id: uuid.UUID, attempt: int, assembly: CompletionAssembly | None) -> RunGrowth:
    """The Run's Completion as its assembly holds it now: its choices in the API's shape."""
    if assembly is None:  # refused before it was admitted: nothing grew
        return RunGrowth(run_id, attempt)
    completion = assembly.completion()
    return RunGrowth(run_id, attempt, completion["id"], completion["choices"], completion["usage"])


class GrowingRuns:
    """One writer for every growing Run of the process, and its announcer."""

    def __init__(self, write_all: WriteAll, announce: Announce, every_s: float = WRITE_EVERY_S) -> None:
        self._write_all, self.announce = write_all, announce
        self._every_s = every_s
        self._grown: dict[tuple[uuid.UUID, int], RunText] = {}
        self._task: asyncio.Task | None = None

    def run(self, run_id: uuid.UUID, attempt: int) -> RunText:
        return RunText(self, run_id, attempt)

    def offer(self, text: RunText) -> None:
        self._grown[(text.run_id, text.attempt)] = text
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._write_while_growing())

    def forget(self, run_id: uuid.UUID, attempt: int) -> None:
        """The Run ended: its end writes its last state, so its growth need not be."""
        self._grown.pop((run_id, attempt), None)

    async def _write_while_growing(self) -> None:
        while self._grown:
            texts, self._grown = list(self._grown.values()), {}
            try:
                await self._write_all([text.growth() for text in texts])
            except Exception:  # noqa: BLE001 - the next write, or the Run's end, makes it good
                log.exception("writing %d growing Runs failed", len(texts))
            await asyncio.sleep(self._every_s)


class RunText:
    """One attempt of a Run as its stream grows it (`on_progress` of the Completion)."""

    def __init__(self, runs: GrowingRuns, run_id: uuid.UUID, attempt: int) -> None:
        self._runs, self.run_id, self.attempt = runs, run_id, attempt
        self.assembly: CompletionAssembly | None = None
        self.texts: dict[int, str] = {}

    async def offer(self, assembly: CompletionAssembly, choices: list[dict[str, Any]]) -> None:
        self.assembly = assembly
        grew = False
        for choice in choices:
            if choice["text"]:  # a token that is part of a character adds no text: nothing to tell
                self.texts[choice["index"]] = self.texts.get(choice["index"], "") + choice["text"]
                grew = True
        self._runs.offer(self)
        if grew:
            await self._runs.announce(self.news())

    def news(self) -> TextsSoFar:
        """Each choice's text so far, by its index (every prompt has `n` of them)."""
        assert self.assembly is not None
        count = len(self.assembly.prompts) * self.assembly.planned.request.n
        return TextsSoFar(self.run_id, self.attempt, tuple(self.texts.get(index, "") for index in range(count)))

    def growth(self) -> RunGrowth:
        return growth_of(self.run_id, self.attempt, self.assembly)

    def ended(self) -> None:
        self._runs.forget(self.run_id, self.attempt)
