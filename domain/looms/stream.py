"""GET /v1/looms/{loom_id}/stream: what a Loom followed as a stream shows
(spec: "Follow a Loom as a stream"). The api sends each update as an event
(api/looms/stream.py: Server-Sent Events, keepalives, `data: [DONE]` last).

First each Node in the order of a read; then, while a Node is queued or
running, each Node whose `status` or `text` changed goes out again, whole (a
Branch that another client started too: its Nodes are new); the updates end
once a read finds no Node that grows.

The changes are pushed, not polled (domain/looms/news.py): the stream
subscribes to the Loom's topic before its first read, so nothing written after
that read passes it by. A running Node's text comes in the Runner's message as
the engine gives it; every other change (a Node's end, a Branch, a stop, a
restart's next attempt is a message too) is a "read the Loom again", which
the stream does. It also reads the Loom when its subscription may have lost
messages, and every `catch_up_s` anyway, so a message that never came (a
restart puts a Node back in the queue without one; a Runner in another
process without Redis) delays an update, never stalls the stream.

The ledger has the last word: a read's Node replaces what the messages
said, except a running Node's text that a message already took further (the
text reaches the ledger up to 100 ms after its message), so no text goes back
while a Node runs. Messages of a Node that ended, or of an attempt that a
restart cut, change nothing.

Each read is a short transaction of its own: a stream that stays open for
an hour holds no connection between its reads.
"""
from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any, AsyncGenerator, Awaitable, Callable, Iterator

from domain.feeds import Message, Missed, Subscription
from domain.looms.ids import parse_id
from domain.looms.news import TextSoFar, loom_topic, read_news
from domain.looms.views import node_json
from domain.services import Services
from ledger.accounts.keys import Principal
from ledger.work import looms
from ledger.work.looms import LoomTree
from ledger.work.tables import LoomNode, NodeStatus

Read = Callable[[], Awaitable[LoomTree]]


@dataclass(frozen=True)
class ReadFailed:
    """A read after the stream started failed: the last update; the spec sends its error object."""

    error: Exception


Update = dict[str, Any] | ReadFailed  # a Node (openapi's Node), or the read that failed


async def follow(services: Services, loom_id: str, principal: Principal) -> AsyncGenerator[Update, None]:
    """The updates of the User's Loom; LoomNotFound (404) before the first for another's or a deleted one."""
    loom = parse_id(loom_id, "loom")

    async def read() -> LoomTree:
        async with services.sessions() as session:
            return await looms.read(session, loom, principal.user_id)

    news = await services.feed.subscribe(loom_topic(loom))
    try:
        first = await read()
    except BaseException:
        await news.aclose()
        raise
    return loom_updates(first, read, news, services.settings.stream_catch_up_s)


async def loom_updates(first: LoomTree, read: Read, news: Subscription,
                       catch_up_s: float) -> AsyncGenerator[Update, None]:
    """The updates of one stream, from its first read on; a read that fails is the last.
    The stream owns `news`, subscribed before `first` was read, and closes it."""
    shown = Shown()
    clock = asyncio.get_running_loop().time
    tree = first
    try:
        while True:
            due = clock() + catch_up_s
            for node in shown.read(tree):
                yield node
            if not tree.growing():
                return
            # The Nodes that the Runner's messages grow, until a message asks for a read or it is due.
            while (messages := await _messages(news, due - clock())) is not None:
                nodes, read_now = shown.take(messages)
                for node in nodes:
                    yield node
                if read_now:
                    break
            try:
                tree = await read()
            except Exception as error:  # noqa: BLE001 - the spec: its error object is the last event
                yield ReadFailed(error)
                return
    finally:
        await news.aclose()


async def _messages(news: Subscription, timeout_s: float) -> list[Message | Missed] | None:
    """The next message and what came with it; None once `timeout_s` passed without one."""
    first = await news.next(timeout_s=max(timeout_s, 0.0))
    return None if first is None else [first, *news.pending()]


class Shown:
    """What the stream knows of each Node, and what it sent of it."""

    def __init__(self) -> None:
        self.nodes: dict[uuid.UUID, LoomNode] = {}  # as the last read gave them
        self.live: dict[uuid.UUID, TextSoFar] = {}  # running Nodes' texts from messages, ahead of that read
        self.unread: dict[uuid.UUID, TextSoFar] = {}  # texts of Nodes that no read showed yet
        self.sent: dict[uuid.UUID, tuple[str, str]] = {}

    def read(self, tree: LoomTree) -> Iterator[dict[str, Any]]:
        """The Nodes of a read that changed, in the order of the read."""
        told = {**self.unread, **self.live}
        self.nodes, self.live, self.unread = {node.id: node for node in tree.nodes}, {}, {}
        for node in tree.nodes:
            live = told.get(node.id)
            if live is not None and _ahead(live, node):
                self.live[node.id] = live
            document = self._document(node.id)
            if document is not None:
                yield document

    def take(self, messages: list[Message | Missed]) -> tuple[list[dict[str, Any]], bool]:
        """The Nodes that the messages grew, and whether one of them asks for a read: one
        that says so (a change committed), a loss, or a Node not read yet (another client's
        Branch). Many such messages need one read."""
        nodes, read_now = [], False
        for message in messages:
            grown = None if isinstance(message, Missed) else read_news(message)
            if grown is None:
                read_now = True
                continue
            if grown.node_id not in self.nodes:
                read_now = True  # the read shows the Node, with this text where it is ahead
                self.unread[grown.node_id] = grown
                continue
            node = self.grow(grown)
            if node is not None:
                nodes.append(node)
        return nodes, read_now

    def grow(self, grown: TextSoFar) -> dict[str, Any] | None:
        """The Node as the message grew it, if that is news; None for a late or a repeated message."""
        node = self.nodes[grown.node_id]
        live = self.live.get(grown.node_id)
        if live is not None:
            newer = grown.attempt > live.attempt or (
                grown.attempt == live.attempt and len(grown.text) > len(live.text) and grown.text.startswith(live.text))
        else:
            newer = _ahead(grown, node)
        if not newer:
            return None
        self.live[grown.node_id] = grown
        return self._document(grown.node_id)

    def _document(self, node_id: uuid.UUID) -> dict[str, Any] | None:
        node, live = self.nodes[node_id], self.live.get(node_id)
        status, text = (NodeStatus.running.value, live.text) if live is not None else (node.status.value, node.text)
        if self.sent.get(node_id) == (status, text):
            return None
        self.sent[node_id] = (status, text)
        document = node_json(node)
        if live is not None:  # running, as a read would show it: no log probabilities or error yet
            document.update(status=status, text=text, logprobs=None, error=None)
        return document


def _ahead(grown: TextSoFar, node: LoomNode) -> bool:
    """Whether a message tells more of the Node than a read of it.

    A running attempt's messages grow its text past what the ledger holds yet; a later attempt
    (a restart) starts it again. The read wins when the Node ended (its end is final), when
    a restart put it back in the queue after that attempt, and when it holds as much text."""
    if node.status == NodeStatus.running:
        return grown.attempt > node.attempt or (
            grown.attempt == node.attempt and len(grown.text) > len(node.text) and grown.text.startswith(node.text))
    if node.status == NodeStatus.queued:
        # A new Node's row has attempt 0; one that a restart put back keeps its cut attempt's number.
        return grown.attempt > node.attempt
    return False

