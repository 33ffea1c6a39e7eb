"""A followed stream's updates (domain/feeds/follow.py: a Loom's Nodes, the Playground's Runs) as
Server-Sent Events: each document an event, a read that failed its error object, `data: [DONE]`
last, always; a keepalive every 5 s between them."""
from __future__ import annotations

import contextlib
import logging
from typing import Any, AsyncGenerator

from api.completions.streaming import DONE, KeepaliveStream, sse
from api.errors_http import INTERNAL
from domain import errors
from domain.error_mapping import as_api_error
from domain.feeds.follow import ReadFailed, Update

log = logging.getLogger("acs.api")


def follow_stream(updates: AsyncGenerator[Update, None], keepalive_s: float, request_id: str | None) -> KeepaliveStream:
    return KeepaliveStream(_events(updates, request_id), keepalive_s, media_type="text/event-stream",
                           headers={"Cache-Control": "no-cache"})


async def _events(updates: AsyncGenerator[Update, None], request_id: str | None) -> AsyncGenerator[bytes, None]:
    # A client that went away closes this body at an event: the updates end there too, reading no more.
    async with contextlib.aclosing(updates):
        async for update in updates:
            yield sse(in_stream_error(update.error, request_id) if isinstance(update, ReadFailed) else update)
    yield DONE


def in_stream_error(error: BaseException, request_id: str | None) -> dict[str, Any]:
    """The error object of a read that failed after the stream started: a deleted Loom's 404,
    another mapped error, or the API's 500."""
    mapped = as_api_error(error)
    if mapped is None:
        log.exception("request %s: a read of its stream failed", request_id, exc_info=error)
        mapped = errors.InternalError(INTERNAL)
    else:
        log.warning("request %s: a read of its stream failed: %s: %s", request_id, mapped.code, error)
    return mapped.body(request_id, in_stream=True)
