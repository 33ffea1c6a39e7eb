"""GET /account/runs/stream: what following Runs shows, one Run or all the Runs of the page (spec:
"Find your Runs again": a Run goes on when you close the tab, and the Playground follows it
again when you come back). The api sends each update as an event (Server-Sent Events,
keepalives, `data: [DONE]` last).

First each Run, oldest first, as the ledger has it: a reload, another tab or another browser
catches up there. Then, while one of them is queued or running, each Run whose state changed
goes out again, whole; the updates end once a read finds none that grows. A Run deleted
meanwhile goes out once as deleted, and is followed no more.

The changes are pushed, not polled (domain/playground/news.py): the stream subscribes to the
topic of each Run that grows before the read it starts from, so nothing written after that
read passes it by. A running Run's texts come in the Runner's messages as the engine gives
them; every other change (its start, its end, a stop, a delete) is a "read the Run again",
which the stream does. It also reads the Runs when a subscription may have lost messages, and
every `stream_catch_up_s` anyway, so a message that never came (a restart puts a Run back in
the queue without one; a Runner in another process without Redis) delays an update, never
stalls the stream.

The ledger has the last word: a read's Run replaces what the messages said, except a running
Run's texts that a message already took further (the ledger has them up to 100 ms after the
message), so no text goes back while a Run runs. While a message's texts are ahead of the
ledger the Run's choices show those texts without their log probabilities (`logprobs` and
`prompt_logprobs` null); the Run's end has them all. Messages of a Run that ended, or of an
attempt that a restart cut, change nothing.

Each read is a short transaction of its own: a stream that stays open for long holds no
connection between its reads.
"""
from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, AsyncGenerator, Awaitable, Callable, Iterator

from domain.feeds import Message, Missed, Subscription
from domain.playground.news import TextsSoFar, read_news, run_topic
from domain.playground.views import OBJECT, run_json
from domain.services import Services
from ledger.work import runs
from ledger.work.tables import RUN_GROWING, PlaygroundRun, RunStatus

# Follow at most the page's Runs: the newest 100, and a group that they cut (6 at most).
MOST_FOLLOWED = 106

Read = Callable[[list[uuid.UUID]], Awaitable[list[PlaygroundRun]]]


@dataclass(frozen=True)
class ReadFailed:
    """A read after the stream started failed: the last update; its error object goes out."""

    error: Exception


Update = dict[str, Any] | ReadFailed  # a Run (views.run_json), a deleted Run, or the read that failed


async def follow(services: Services, user_id: uuid.UUID,
                 run_ids: list[uuid.UUID] | None) -> AsyncGenerator[Update, None]:
    """The updates of the User's Runs `run_ids` (RunNotFound, before the first, for one that is
    another User's, deleted, or none), or without ids of every Run of the User that grows now."""
    async def read(ids: list[uuid.UUID]) -> list[PlaygroundRun]:
        async with services.sessions() as session:
            return await runs.present(session, user_id, ids)

    async with services.sessions() as session:
        if run_ids is None:
            run_ids = await runs.growing_ids(session, user_id)
        found = await runs.by_ids(session, user_id, run_ids)
    # Only a Run that grows now can change; subscribed before the read that the stream starts from.
    news = await Topics.subscribe(services, [run.id for run in found if run.status in RUN_GROWING])
    try:
        first = await read(run_ids)
    except BaseException:
        await news.aclose()
        raise
    return run_updates(first, read, news, services.settings.stream_catch_up_s, services.clock)


async def run_updates(first: list[PlaygroundRun], read: Read, news: Topics, catch_up_s: float,
                      now: Callable[[], datetime]) -> AsyncGenerator[Update, None]:
    """The updates of one stream, from its first read on; a read that fails is the last.
    The stream owns `news`, subscribed before `first` was read, and closes it."""
    shown = Shown(now)
    clock = asyncio.get_running_loop().time
    found = first
    try:
        while True:
            due = clock() + catch_up_s
            for document in shown.read(found):
                yield document
            if not any(run.status in RUN_GROWING for run in found):
                return
            # The Runs that the Runner's messages grow, until a message asks for a read or it is due.
            while (messages := await news.next(due - clock())) is not None:
                documents, read_now = shown.take(messages)
                for document in documents:
                    yield document
                if read_now:
                    break
            try:
                found = await read([run.id for run in found])
            except Exception as error:  # noqa: BLE001 - its error object is the last event
                yield ReadFailed(error)
                return
    finally:
        await news.aclose()


class Topics:
    """The subscriptions of the followed Runs' topics, read as one."""

    def __init__(self, subscriptions: list[Subscription]) -> None:
        self._subscriptions = subscriptions
        self._queue: asyncio.Queue[Message | Missed] = asyncio.Queue()
        self._pumps = [asyncio.create_task(self._pump(subscription)) for subscription in subscriptions]

    @classmethod
    async def subscribe(cls, services: Services, run_ids: list[uuid.UUID]) -> Topics:
        subscriptions: list[Subscription] = []
        try:
            for run_id in run_ids:
                subscriptions.append(await services.feed.subscribe(run_topic(run_id)))
        except BaseException:
            for subscription in subscriptions:
                await subscription.aclose()
            raise
        return cls(subscriptions)

    async def _pump(self, subscription: Subscription) -> None:
        async for item in subscription:
            self._queue.put_nowait(item)

    async def next(self, timeout_s: float) -> list[Message | Missed] | None:
        """The next message and what came with it; None once `timeout_s` passed without one."""
        try:
            first = await asyncio.wait_for(self._queue.get(), max(timeout_s, 0.0))
        except TimeoutError:
            return None
        taken = [first]
        while not self._queue.empty():
            taken.append(self._queue.get_nowait())
        return taken

    async def aclose(self) -> None:
        for pump in self._pumps:
            pump.cancel()
        await asyncio.gather(*self._pumps, return_exceptions=True)
        for subscription in self._subscriptions:
            await subscription.aclose()


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


class Shown:
    """What the stream knows of each Run, and what it sent of it."""

    def __init__(self, now: Callable[[], datetime]) -> None:
        self.now = now
        self.runs: dict[uuid.UUID, PlaygroundRun] = {}  # as the last read gave them
        self.live: dict[uuid.UUID, TextsSoFar] = {}  # running Runs' texts from messages, ahead of that read
        self.sent: dict[uuid.UUID, tuple[Any, ...]] = {}

    def read(self, found: list[PlaygroundRun]) -> Iterator[dict[str, Any]]:
        """The Runs of a read that changed, oldest first; then each Run that a delete took."""
        told = self.live
        self.runs, self.live = {run.id: run for run in found}, {}
        for run in found:
            live = told.get(run.id)
            if live is not None and _ahead(live, run):
                self.live[run.id] = live
            document = self._document(run.id)
            if document is not None:
                yield document
        for gone in [run_id for run_id in self.sent if run_id not in self.runs]:
            del self.sent[gone]
            yield {"id": str(gone), "object": OBJECT, "deleted": True}

    def take(self, messages: list[Message | Missed]) -> tuple[list[dict[str, Any]], bool]:
        """The Runs that the messages grew, and whether one of them asks for a read: one that says
        so (a change committed), or a loss. Many such messages need one read."""
        documents, read_now = [], False
        for message in messages:
            grown = None if isinstance(message, Missed) else read_news(message)
            if grown is None:
                read_now = True
                continue
            if grown.run_id not in self.runs:
                continue  # not followed here
            document = self.grow(grown)
            if document is not None:
                documents.append(document)
        return documents, read_now

    def grow(self, grown: TextsSoFar) -> dict[str, Any] | None:
        """The Run as the message grew it, if that is news; None for a late or a repeated message."""
        live = self.live.get(grown.run_id)
        if live is not None:
            newer = grown.attempt > live.attempt or (
                grown.attempt == live.attempt and _further(grown.texts, dict(enumerate(live.texts))))
        else:
            newer = _ahead(grown, self.runs[grown.run_id])
        if not newer:
            return None
        self.live[grown.run_id] = grown
        return self._document(grown.run_id)

    def _document(self, run_id: uuid.UUID) -> dict[str, Any] | None:
        run, live = self.runs[run_id], self.live.get(run_id)
        if live is not None:
            state: tuple[Any, ...] = (RunStatus.running.value, live.texts)
        else:
            state = (run.status.value, run.choices, run.usage, run.error, run.activations_expire_at)
        if self.sent.get(run_id) == state:
            return None
        self.sent[run_id] = state
        document = run_json(run, self.now())
        if live is not None:  # running, as a read would show it, with the texts ahead of the read
            document.update(status=RunStatus.running.value, error=None, choices=_live_choices(document, live))
        return document


def _live_choices(document: dict[str, Any], live: TextsSoFar) -> list[dict[str, Any]]:
    read = {choice["index"]: choice for choice in document["choices"]}
    return [{**read.get(index, {}), "index": index, "text": text, "logprobs": None, "finish_reason": None,
             "stop_reason": None, "prompt_logprobs": None} for index, text in enumerate(live.texts)]
