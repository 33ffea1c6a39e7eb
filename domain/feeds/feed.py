"""A feed: messages published on a topic reach each subscriber of that topic, now.

One topic per thing that grows (`topic("loom", loom_id)`, `topic("run", run_id)`): its writer
publishes as it writes, and a stream that follows the thing subscribes before its first read
of the ledger, so nothing written after that read can pass it by unseen.

A feed is a fast path, never the record: the ledger is. A message may be lost (a subscriber
that falls far behind, Redis that went away), so a subscription says where it may have lost
some (`MISSED`), and a subscriber catches up from the ledger then, and also now and then
anyway. So `publish` never fails its caller for the feed's sake: a message that could not go
out is a lost one.

Messages are JSON objects. Both implementations carry them as JSON text, so a subscriber gets
its own copy and a message that only one of them could carry fails in both.
"""
from __future__ import annotations

import asyncio
import json
from collections import deque
from typing import Any, Awaitable, Callable, Protocol

Message = dict[str, Any]  # a JSON object


class Missed:
    """The subscription may have lost messages here: read what they told from the ledger."""

    def __repr__(self) -> str:
        return "MISSED"


MISSED = Missed()

# Messages waiting in one subscription whose reader is this far behind are dropped for one MISSED:
# a client that stops reading its stream holds no more than this.
QUEUE_LIMIT = 1024


def topic(kind: str, thing_id: object) -> str:
    """The topic of one thing that grows, such as `loom:<id>`."""
    return f"{kind}:{thing_id}"


def encode(message: Message) -> str:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


class Subscription:
    """One subscriber's messages of one topic, in the order they were published.

    Iterate it (each item a Message or MISSED), or take the next with a deadline (`next`).
    Closing it ends the subscription; a feed's `subscribe` hands it over already live."""

    def __init__(self, topic: str, on_close: Callable[[Subscription], Awaitable[None]],
                 limit: int = QUEUE_LIMIT) -> None:
        self.topic = topic
        self._on_close, self._limit = on_close, limit
        self._waiting: deque[str] = deque()
        self._missed = False
        self._ready = asyncio.Event()
        self.closed = False

    # -- the feed's side ------------------------------------------------------------------------------

    def deliver(self, data: str) -> None:
        if self.closed:
            return
        if len(self._waiting) >= self._limit:
            self.miss()
            return
        self._waiting.append(data)
        self._ready.set()

    def miss(self) -> None:
        """What waits, and what was lost, is read from the ledger instead."""
        self._waiting.clear()
        self._missed = True
        self._ready.set()

    # -- the subscriber's side ----------------------------------------------------------------------------

    def pending(self) -> list[Message | Missed]:
        """What has come and was not taken yet, without waiting."""
        taken: list[Message | Missed] = []
        while (item := self._take()) is not None:
            taken.append(item)
        return taken

    async def next(self, timeout_s: float | None = None) -> Message | Missed | None:
        """The next message (or MISSED); None when `timeout_s` passed first, or once closed."""
        try:
            async with asyncio.timeout(timeout_s):
                while not self.closed:
                    item = self._take()
                    if item is not None:
                        return item
                    self._ready.clear()
                    await self._ready.wait()
        except TimeoutError:
            pass
        return None

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Message | Missed:
        item = await self.next()
        if item is None:
            raise StopAsyncIteration
        return item

    async def aclose(self) -> None:
        if not self.closed:
            self.closed = True
            self._waiting.clear()
            self._ready.set()
            await self._on_close(self)

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    def _take(self) -> Message | Missed | None:
        if self.closed:
            return None
        if self._missed:  # before what came after the loss
            self._missed = False
            return MISSED
        if self._waiting:
            return json.loads(self._waiting.popleft())
        return None


class Feed(Protocol):
    async def publish(self, topic: str, message: Message) -> None:
        """To the topic's subscribers now. A message that could not go out is lost, never the
        publisher's failure; one that is not JSON raises TypeError."""
        ...

    async def subscribe(self, topic: str) -> Subscription:
        """A subscription that is live when it is returned: it gets every message published after."""
        ...

    async def aclose(self) -> None:
        """End every subscription, and what the feed runs to deliver them."""
        ...
