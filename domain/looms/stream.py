"""GET /v1/looms/{loom_id}/stream: what a Loom followed as a stream shows
(spec: "Follow a Loom as a stream"). The api sends each update as an event
(api/looms/stream.py: Server-Sent Events, keepalives, `data: [DONE]` last).

First each Node in the order of a read; then, while a Node is queued or
running, the Loom is read again every 250 ms and each Node whose `status` or
`text` changed goes out again, whole (a Branch that another client started
too: its Nodes are new); the updates end once no Node grows. A Node's text
reaches the stream from the database, where its run writes it as it grows
(domain/looms/handler.py), so a stream follows a Branch that runs anywhere.

Each read is a short transaction of its own: a stream that stays open for
an hour holds no connection between its reads.
"""
from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any, AsyncGenerator, Awaitable, Callable

from domain.looms.ids import parse_id
from domain.looms.views import node_json
from domain.services import Services
from ledger.work import looms
from ledger.work.looms import LoomTree
from ledger.work.tables import LoomNode
from ledger.accounts.keys import Principal

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

    first = await read()
    return loom_updates(first, read, services.settings.loom_stream_poll_s)


def _state(node: LoomNode) -> tuple[str, str]:
    return node.status.value, node.text


async def loom_updates(first: LoomTree, read: Read, poll_s: float) -> AsyncGenerator[Update, None]:
    """The updates of one stream, from its first read on; a read that fails is the last."""
    sent: dict[uuid.UUID, tuple[str, str]] = {}
    tree = first
    clock = asyncio.get_running_loop().time
    next_read = clock()
    while True:
        for node in tree.nodes:
            if sent.get(node.id) != _state(node):
                sent[node.id] = _state(node)
                yield node_json(node)
        if not tree.growing():
            return
        # Every poll_s from the last read's start, so a slow read does not stretch the cadence.
        next_read = max(next_read + poll_s, clock())
        await asyncio.sleep(next_read - clock())
        try:
            tree = await read()
        except Exception as error:  # noqa: BLE001 - the spec: its error object is the last event
            yield ReadFailed(error)
            return
