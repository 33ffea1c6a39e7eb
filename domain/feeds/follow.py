"""Following what grows, for a stream route: the ledger's reads, pushed on by the feed's messages.

The Loom stream (domain/looms/stream.py) and the Run stream (domain/playground/stream.py) follow
things that grow the same way, and this is that way, once:

- The stream subscribes to the things' topics before its first read of the ledger, so nothing
  written after that read passes it by.
- Each read's changes go out; the updates end once a read finds nothing that grows.
- Between reads, a running thing's text comes in the Runner's messages as the engine gives it
  (`Shown.take`). Every other change (a start, an end, a stop, a delete) is a "read again", and
  so is a subscription that may have lost messages (MISSED).
- It reads anyway every `catch_up_s`: a message that never came (a restart puts a thing back in
  the queue without one; a Runner in another process without Redis) delays an update, never
  stalls the stream.

Each read is a short transaction of its own, the caller's: a stream that stays open for an hour
holds no connection between its reads.
"""
from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, AsyncGenerator, Awaitable, Callable, Generic, Hashable, Iterable, TypeVar

from domain.feeds.feed import Feed, Message, Missed, Subscription

State = TypeVar("State")  # what one read of the ledger gives
Grown = TypeVar("Grown")  # what one of the Runner's messages tells
Key = TypeVar("Key", bound=Hashable)  # which thing grew


@dataclass(frozen=True)
class ReadFailed:
    """A read after the stream started failed: the last update; its error object goes out."""

    error: Exception


Update = dict[str, Any] | ReadFailed  # a document that changed, or the read that failed


class Shown(ABC, Generic[State, Grown, Key]):
    """What one stream knows of the things it follows, and what it sent of them.

    `live` holds, by thing, the newest message whose text is ahead of the last read (the ledger
    has a text up to 100 ms after its message): no text goes back while a thing runs. `sent`
    holds what the stream last sent of each thing, so a repeat goes out no more."""

    def __init__(self) -> None:
        self.live: dict[Key, Grown] = {}
        self.sent: dict[Key, Hashable] = {}

    @abstractmethod
    def read(self, state: State) -> Iterable[dict[str, Any]]:
        """The documents of a read that changed since they were last sent."""

    @abstractmethod
    def growing(self) -> bool:
        """Whether the last read found something that may still change."""

    @abstractmethod
    def news(self, message: Message) -> Grown | None:
        """The growth a message tells; None for one that asks for a read."""

    @abstractmethod
    def key(self, grown: Grown) -> Key:
        """The thing that grew."""

    @abstractmethod
    def follows(self, grown: Grown) -> bool:
        """Whether the last read showed the thing that grew."""

    @abstractmethod
    def ahead(self, grown: Grown) -> bool:
        """Whether the message tells more of its thing than the last read of it."""

    @abstractmethod
    def further(self, grown: Grown, than: Grown) -> bool:
        """Whether the message tells more than an earlier message of the same thing."""

    @abstractmethod
    def document(self, key: Key) -> dict[str, Any] | None:
        """The thing as the stream knows it now, if that is news (`changed`)."""

    def changed(self, key: Key, state: Hashable) -> bool:
        """Whether `state` differs from what was sent of the thing; it counts as sent from now."""
        if self.sent.get(key) == state:
            return False
        self.sent[key] = state
        return True

    def grow(self, grown: Grown) -> dict[str, Any] | None:
        """The document as the message grew it, if that is news; None for a late or a repeated one."""
        key = self.key(grown)
        live = self.live.get(key)
        if not (self.further(grown, live) if live is not None else self.ahead(grown)):
            return None
        self.live[key] = grown
        return self.document(key)

    def unread(self, grown: Grown) -> bool:
        """A message of a thing no read showed: whether it asks for a read. Not by default."""
        return False

    def take(self, messages: list[Message | Missed]) -> tuple[list[dict[str, Any]], bool]:
        """The documents that the messages grew, and whether one of them asks for a read. Many such
        messages need one read."""
        documents: list[dict[str, Any]] = []
        read_now = False
        for message in messages:
            grown = None if isinstance(message, Missed) else self.news(message)
            if grown is None:
                read_now = True
            elif not self.follows(grown):
                read_now = self.unread(grown) or read_now
            elif (document := self.grow(grown)) is not None:
                documents.append(document)
        return documents, read_now


class Subscriptions:
    """The subscriptions of a stream's topics, read as one."""

    def __init__(self, subscriptions: list[Subscription]) -> None:
        self._subscriptions = subscriptions
        self._queue: asyncio.Queue[Message | Missed] = asyncio.Queue()
        self._pumps = [asyncio.create_task(self._pump(subscription)) for subscription in subscriptions]

    @classmethod
    async def subscribe(cls, feed: Feed, topics: list[str]) -> Subscriptions:
        """Live when returned: each topic's messages published after this."""
        subscriptions: list[Subscription] = []
        try:
            for topic in topics:
                subscriptions.append(await feed.subscribe(topic))
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
        """Leave every topic. A stream whose client went away is closed inside a cancelled scope,
        where each await that suspends is cancelled again: so nothing here waits for the pumps
        (a closed subscription ends its pump), and each subscription is closed even when closing
        another was cancelled."""
        for pump in self._pumps:
            pump.cancel()
        raised: BaseException | None = None
        for subscription in self._subscriptions:
            try:
                await subscription.aclose()
            except BaseException as error:  # noqa: BLE001 - raised once every topic is left
                raised = raised or error
        if raised is not None:
            raise raised


async def followed(feed: Feed, topics: list[str], read: Callable[[], Awaitable[State]], shown: Shown[State, Any, Any],
                   catch_up_s: float) -> AsyncGenerator[Update, None]:
    """The updates of one stream: subscribed to `topics`, then the first read (whose failure is
    raised here, before any update), then the updates from it on."""
    news = await Subscriptions.subscribe(feed, topics)
    try:
        first = await read()
    except BaseException:
        await news.aclose()
        raise
    return _updates(first, read, news, shown, catch_up_s)


async def _updates(first: State, read: Callable[[], Awaitable[State]], news: Subscriptions,
                   shown: Shown[State, Any, Any], catch_up_s: float) -> AsyncGenerator[Update, None]:
    """A read that fails is the last update. The stream owns `news` and closes it."""
    clock = asyncio.get_running_loop().time
    state = first
    try:
        while True:
            due = clock() + catch_up_s
            for document in shown.read(state):
                yield document
            if not shown.growing():
                return
            # What the Runner's messages grow, until a message asks for a read or one is due.
            while (messages := await news.next(due - clock())) is not None:
                documents, read_now = shown.take(messages)
                for document in documents:
                    yield document
                if read_now:
                    break
            try:
                state = await read()
            except Exception as error:  # noqa: BLE001 - its error object is the last event
                yield ReadFailed(error)
                return
    finally:
        await news.aclose()
