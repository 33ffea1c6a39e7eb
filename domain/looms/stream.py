"""GET /v1/looms/{loom_id}/stream: what a Loom followed as a stream shows
(spec: "Follow a Loom as a stream"). The api sends each update as an event
(api/follow_stream.py: Server-Sent Events, keepalives, `data: [DONE]` last).

First each Node in the order of a read; then, while a Node is queued or
running, each Node whose `status` or `text` changed goes out again, whole (a
Branch that another client started too: its Nodes are new); the updates end
once a read finds no Node that grows.

The changes are pushed, not polled, as domain/feeds/follow.py says: the stream
subscribes to the Loom's topic (domain/looms/news.py) before its first read. A
running Node's text comes in the Runner's message as the engine gives it; every
other change (a Node's end, a Branch, a stop, a restart's next attempt is a
message too) is a "read the Loom again".

The ledger has the last word: a read's Node replaces what the messages
said, except a running Node's text that a message already took further (the
text reaches the ledger up to 100 ms after its message), so no text goes back
while a Node runs. Messages of a Node that ended, or of an attempt that a
restart cut, change nothing.
"""
from __future__ import annotations

import uuid
from typing import Any, AsyncGenerator, Iterator

from domain.feeds import Message
from domain.feeds.follow import Shown, Update, followed
from domain.looms.ids import parse_id
from domain.looms.news import TextSoFar, loom_topic, read_news
from domain.looms.views import node_json
from domain.services import Services
from ledger.accounts.keys import Principal
from ledger.work import looms
from ledger.work.looms import LoomTree
from ledger.work.tables import LoomNode, NodeStatus

__all__ = ["Update", "follow"]


async def follow(services: Services, loom_id: str, principal: Principal) -> AsyncGenerator[Update, None]:
    """The updates of the User's Loom; LoomNotFound (404) before the first for another's or a deleted one."""
    loom = parse_id(loom_id, "loom")

    async def read() -> LoomTree:
        async with services.sessions() as session:
            return await looms.read(session, loom, principal.user_id)

    return await followed(services.feed, [loom_topic(loom)], read, NodesShown(), services.settings.stream_catch_up_s)


class NodesShown(Shown[LoomTree, TextSoFar, uuid.UUID]):
    """What the stream knows of each Node, and what it sent of it (`live`, `sent`: Shown's)."""

    def __init__(self) -> None:
        super().__init__()
        self.tree: LoomTree | None = None  # as the last read gave it
        self.nodes: dict[uuid.UUID, LoomNode] = {}
        self.unread_texts: dict[uuid.UUID, TextSoFar] = {}  # texts of Nodes that no read showed yet

    def read(self, state: LoomTree) -> Iterator[dict[str, Any]]:
        """The Nodes of a read that changed, in the order of the read."""
        told = {**self.unread_texts, **self.live}
        self.tree, self.nodes, self.live, self.unread_texts = state, {node.id: node for node in state.nodes}, {}, {}
        for node in state.nodes:
            live = told.get(node.id)
            if live is not None and _ahead(live, node):
                self.live[node.id] = live
            document = self.document(node.id)
            if document is not None:
                yield document

    def growing(self) -> bool:
        return self.tree is not None and bool(self.tree.growing())

    def news(self, message: Message) -> TextSoFar | None:
        return read_news(message)

    def key(self, grown: TextSoFar) -> uuid.UUID:
        return grown.node_id

    def follows(self, grown: TextSoFar) -> bool:
        return grown.node_id in self.nodes

    def unread(self, grown: TextSoFar) -> bool:
        """Another client's Branch: the read shows the Node, with this text where it is ahead."""
        self.unread_texts[grown.node_id] = grown
        return True

    def ahead(self, grown: TextSoFar) -> bool:
        return _ahead(grown, self.nodes[grown.node_id])

    def further(self, grown: TextSoFar, than: TextSoFar) -> bool:
        return grown.attempt > than.attempt or (
            grown.attempt == than.attempt and len(grown.text) > len(than.text) and grown.text.startswith(than.text))

    def document(self, key: uuid.UUID) -> dict[str, Any] | None:
        node, live = self.nodes[key], self.live.get(key)
        status, text = (NodeStatus.running.value, live.text) if live is not None else (node.status.value, node.text)
        if not self.changed(key, (status, text)):
            return None
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

