"""The Completions of the Runs that grow in this process: told as they grow, written in batches.

Each output of a Run's Completion is told at once to the Run's streams (`announce`:
domain/playground/news.py, over the feed): the text of each choice so far, so a stream need not
wait for the ledger. The ledger is written in batches (domain/growing_writes.py), conditioned on
the Run still growing under its attempt (`ledger.work.runs`). A Run's state is taken from its
assembly when a batch writes it, not at each output, so a Run with log probabilities does not
build its whole choices at every token.
"""
from __future__ import annotations

import uuid
from typing import Any, Awaitable, Callable

from domain.completions.assembly import CompletionAssembly
from domain.growing_writes import WRITE_EVERY_S, NewestWrites
from domain.playground.news import TextsSoFar
from ledger.work.runs import RunGrowth

WriteAll = Callable[[list[RunGrowth]], Awaitable[Any]]
Announce = Callable[[TextsSoFar], Awaitable[None]]


def growth_of(run_id: uuid.UUID, attempt: int, assembly: CompletionAssembly | None) -> RunGrowth:
    """The Run's Completion as its assembly holds it now: its choices in the API's shape."""
    if assembly is None:  # refused before it was admitted: nothing grew
        return RunGrowth(run_id, attempt)
    completion = assembly.completion()
    return RunGrowth(run_id, attempt, completion["id"], completion["choices"], completion["usage"])


class GrowingRuns:
    """One writer for every growing Run of the process (domain/growing_writes.py), and its announcer."""

    def __init__(self, write_all: WriteAll, announce: Announce, every_s: float = WRITE_EVERY_S) -> None:
        # The Runs' states are taken from their assemblies when a batch is written, not at each output.
        async def write_texts(texts: list[RunText]) -> Any:
            return await write_all([text.growth() for text in texts])
        self.writes: NewestWrites[RunText] = NewestWrites(write_texts, "Runs", every_s)
        self.announce = announce

    def run(self, run_id: uuid.UUID, attempt: int) -> RunText:
        return RunText(self, run_id, attempt)


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
        self._runs.writes.offer((self.run_id, self.attempt), self)
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
        self._runs.writes.forget((self.run_id, self.attempt))
