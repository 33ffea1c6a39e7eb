"""GET /account/runs/stream: what following Runs shows, one Run or all the Runs of the page (spec:
"Find your Runs again": a Run goes on when you close the tab, and the Playground follows it
again when you come back). The api sends each update as an event (Server-Sent Events,
keepalives, `data: [DONE]` last).

First each Run, oldest first, as the ledger has it: a reload, another tab or another browser
catches up there. Then, while one of them is queued or running, each Run whose state changed
goes out again, whole; the updates end once a read finds none that grows. A Run deleted
meanwhile goes out once as deleted, and is followed no more.

The changes are pushed, not polled, as domain/feeds/follow.py says: the stream subscribes to
the topic of each Run that grows (domain/playground/news.py) before the read it starts from. A
running Run's texts come in the Runner's messages as the engine gives them; every other change
(its start, its end, a stop, a delete) is a "read the Runs again".

The ledger has the last word: a read's Run replaces what the messages said, except a running
Run's texts that a message already took further (the ledger has them up to 100 ms after the
message), so no text goes back while a Run runs. While a message's texts are ahead of the
ledger the Run's choices show those texts without their log probabilities (`logprobs` and
`prompt_logprobs` null); the Run's end has them all. Messages of a Run that ended, or of an
attempt that a restart cut, change nothing.
"""
from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any, AsyncGenerator, Callable, Iterator

from domain.feeds import Message
from domain.feeds.follow import Shown, Update, followed
from domain.playground.news import TextsSoFar, read_news, run_topic
from domain.playground.views import OBJECT, run_json
from domain.services import Services
from ledger.work import runs
from ledger.work.tables import RUN_GROWING, PlaygroundRun, RunStatus

# Follow at most the page's Runs: the newest 100, and a group that they cut (6 at most).
MOST_FOLLOWED = 106

__all__ = ["MOST_FOLLOWED", "Update", "follow"]


async def follow(services: Services, user_id: uuid.UUID,
                 run_ids: list[uuid.UUID] | None) -> AsyncGenerator[Update, None]:
    """The updates of the User's Runs `run_ids` (RunNotFound, before the first, for one that is
    another User's, deleted, or none), or without ids of every Run of the User that grows now."""
    async with services.sessions() as session:
        if run_ids is None:
            run_ids = await runs.growing_ids(session, user_id)
        found = await runs.by_ids(session, user_id, run_ids)
    followed_ids = run_ids

    async def read() -> list[PlaygroundRun]:
        async with services.sessions() as session:
            return await runs.present(session, user_id, followed_ids)

    # Only a Run that grows now can change: its topic alone.
    topics = [run_topic(run.id) for run in found if run.status in RUN_GROWING]
    return await followed(services.feed, topics, read, RunsShown(services.clock),
                          services.settings.stream_catch_up_s)


def _texts(run: PlaygroundRun) -> dict[int, str]:
    return {choice["index"]: choice["text"] for choice in json.loads(run.choices)}


def _ahead(grown: TextsSoFar, run: PlaygroundRun) -> bool:
    """Whether a message tells more of the Run than a read of it.

    A running attempt's messages grow its texts past what the ledger holds yet; a later attempt
    (a restart) starts it again. The read wins when the Run ended (its end is final), when a
    restart put it back in the queue after that attempt, and when it holds as much text."""
    if run.status == RunStatus.running:
        if grown.attempt != run.attempt:
            return grown.attempt > run.attempt
        return _further(grown.texts, _texts(run))
    if run.status == RunStatus.queued:
        return grown.attempt > run.attempt
    return False


def _further(texts: tuple[str, ...], than: dict[int, str]) -> bool:
    """Each text goes on from what `than` has of it, and one is longer."""
    known = [than.get(index, "") for index in range(len(texts))]
    return (all(text.startswith(before) for text, before in zip(texts, known))
            and any(len(text) > len(before) for text, before in zip(texts, known)))


class RunsShown(Shown[list[PlaygroundRun], TextsSoFar, uuid.UUID]):
    """What the stream knows of each Run, and what it sent of it (`live`, `sent`: Shown's)."""

    def __init__(self, now: Callable[[], datetime]) -> None:
        super().__init__()
        self.now = now
        self.runs: dict[uuid.UUID, PlaygroundRun] = {}  # as the last read gave them

    def read(self, state: list[PlaygroundRun]) -> Iterator[dict[str, Any]]:
        """The Runs of a read that changed, oldest first; then each Run that a delete took."""
        told = self.live
        self.runs, self.live = {run.id: run for run in state}, {}
        for run in state:
            live = told.get(run.id)
            if live is not None and _ahead(live, run):
                self.live[run.id] = live
            document = self.document(run.id)
            if document is not None:
                yield document
        for gone in [run_id for run_id in self.sent if run_id not in self.runs]:
            del self.sent[gone]
            yield {"id": str(gone), "object": OBJECT, "deleted": True}

    def growing(self) -> bool:
        return any(run.status in RUN_GROWING for run in self.runs.values())

    def news(self, message: Message) -> TextsSoFar | None:
        return read_news(message)

    def key(self, grown: TextsSoFar) -> uuid.UUID:
        return grown.run_id

    def follows(self, grown: TextsSoFar) -> bool:
        return grown.run_id in self.runs  # a message of a Run this stream does not follow is not its news

    def ahead(self, grown: TextsSoFar) -> bool:
        return _ahead(grown, self.runs[grown.run_id])

    def further(self, grown: TextsSoFar, than: TextsSoFar) -> bool:
        return grown.attempt > than.attempt or (
            grown.attempt == than.attempt and _further(grown.texts, dict(enumerate(than.texts))))

    def document(self, key: uuid.UUID) -> dict[str, Any] | None:
        run, live = self.runs[key], self.live.get(key)
        if live is not None:
            state: tuple[Any, ...] = (RunStatus.running.value, live.texts)
        else:
            state = (run.status.value, run.choices, run.usage, run.error, run.activations_expire_at)
        if not self.changed(key, state):
            return None
        document = run_json(run, self.now())
        if live is not None:  # running, as a read would show it, with the texts ahead of the read
            document.update(status=RunStatus.running.value, error=None, choices=_live_choices(document, live))
        return document


def _live_choices(document: dict[str, Any], live: TextsSoFar) -> list[dict[str, Any]]:
    read = {choice["index"]: choice for choice in document["choices"]}
    return [{**read.get(index, {}), "index": index, "text": text, "logprobs": None, "finish_reason": None,
             "stop_reason": None, "prompt_logprobs": None} for index, text in enumerate(live.texts)]
