"""What POST /v1/completions answers, without HTTP (a replayed Idempotency-Key answer is a
`domain.answers.Answer`). api/completions/answers.py renders each: the long wait's spaces, the
SSE framing, the keepalives and `[DONE]` are the transport's, not the Completion's."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, AsyncGenerator, Mapping


@dataclass(frozen=True)
class WholeAnswer:
    """A Completion without a stream, admitted and running.

    `document` is the task of its JSON document (or of its ApiError). It runs on when the client
    goes away, records the Idempotency-Key's answer and pays only for its usage: whoever waits
    for it must not cancel it. `headers` go out with the status (the clamp header). `started`,
    on the event loop's clock, is when the long wait (`settings.long_wait_s`) began: before the
    wait for a place, so that the wait counts in it.
    """

    document: asyncio.Task[dict[str, Any]]
    headers: Mapping[str, str]
    started: float


@dataclass(frozen=True)
class StreamAnswer:
    """A stream whose first output Inference has sent: its status and `headers` go out now.

    `documents` yields each chunk in order, and after a late failure the error object, then
    ends; by then its Hold is settled. Closing it early (the client went away) stops Inference,
    frees the places and pays for what was sent: close it as soon as the body is cut.
    """

    headers: Mapping[str, str]
    documents: AsyncGenerator[dict[str, Any], None]
