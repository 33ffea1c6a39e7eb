"""GET /v1/looms/{loom_id}/stream: a Loom followed as Server-Sent Events
(spec: "Follow a Loom as a stream").

First each Node in the order of a read; then, while a Node is queued or
running, the Loom is read again every 250 ms and each Node whose `status` or
`text` changed goes out again, whole (a Branch that another client started
too: its Nodes are new); `data: [DONE]` once no Node grows. A Node's text
reaches the stream from the database, where its run writes it as it grows
(domain/looms/handler.py), so a stream follows a Branch that runs anywhere.

Each read is a short transaction of its own: a stream that stays open for
an hour holds no connection between its reads.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, AsyncIterator, Awaitable, Callable

from domain import errors
from api.completions.streaming import DONE, KeepaliveStream, sse
from domain.error_mapping import as_api_error
from api.errors_http import INTERNAL
from domain.looms.views import node_json
from domain.services import Services
from ledger.work import looms
from ledger.work.looms import LoomTree
from ledger.work.tables import LoomNode

log = logging.getLogger("acs.api")

Read = Callable[[], Awaitable[LoomTree]]


async def follow(services: Services, loom_id: uuid.UUID, principal: Any, request_id: str | None = None) -> Any:
    """The stream of the User's Loom; LoomNotFound (404) before it starts for another's or a deleted one."""

    async def read() -> LoomTree:
        async with services.sessions() as session:
            return await looms.read(session, loom_id, principal.user_id)

    first = await read()
    settings = services.settings
    events = loom_events(first, read, settings.loom_stream_poll_s, request_id)
    return KeepaliveStream(events, settings.keepalive_s, media_type="text/event-stream",
                           headers={"Cache-Control": "no-cache"})


def _state(node: LoomNode) -> tuple[str, str]:
    return node.status.value, node.text


async def loom_events(first: LoomTree, read: Read, poll_s: float, request_id: str | None) -> AsyncIterator[bytes]:
    """The events of one stream, from its first read on; [DONE] last, always."""
    sent: dict[uuid.UUID, tuple[str, str]] = {}
    tree: LoomTree | None = first
    clock = asyncio.get_running_loop().time
    next_read = clock()
    while tree is not None:
        for node in tree.nodes:
            if sent.get(node.id) != _state(node):
                sent[node.id] = _state(node)
                yield sse(node_json(node))
        if not tree.growing():
            break
        # Every poll_s from the last read's start, so a slow read does not stretch the cadence.
        next_read = max(next_read + poll_s, clock())
        await asyncio.sleep(next_read - clock())
        try:
            tree = await read()
        except Exception as error:  # noqa: BLE001 - the spec: its error object is the last event
            yield sse(in_stream_error(error, request_id))
            tree = None
    yield DONE


def in_stream_error(error: BaseException, request_id: str | None) -> dict[str, Any]:
    """The error object of a read that failed after the stream started: a deleted Loom's 404,
    another mapped error, or the API's 500."""
    mapped = as_api_error(error)
    if mapped is None:
        log.exception("request %s: a read of its Loom stream failed", request_id, exc_info=error)
        mapped = errors.InternalError(INTERNAL)
    else:
        log.warning("request %s: a read of its Loom stream failed: %s: %s", request_id, mapped.code, error)
    return mapped.body(request_id, in_stream=True)
