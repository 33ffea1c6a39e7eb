"""How a Completion goes over HTTP: SSE with keepalives, or JSON that
starts with spaces when Inference takes longer than the long wait."""
from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncGenerator, Awaitable, Callable

from fastapi.responses import StreamingResponse

from domain import errors

KEEPALIVE = b": keepalive\n\n"
DONE = b"data: [DONE]\n\n"


def sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


# Pieces sent in a row before one turn of the event loop: rare enough to cost a token stream
# nothing measurable, often enough that a burst to a client that left stops early.
YIELD_EVERY = 64


class KeepaliveStream(StreamingResponse):
    """A StreamingResponse that also sends `beat` every `interval_s` from its start (the spec: a
    keepalive every 5 s for the whole stream), between two pieces of the body, never after the last.

    The beats come from a timer task of their own, so each piece goes from the body to the socket
    in the task that made it: a hand-over between tasks on every piece (a pump and a queue) cost
    each token of a stream several turns of the one event loop that carries every stream.

    `render` makes each item of `content` its piece, and `last` ends a body that ended: here, not
    in a generator around `content`, which each token would pass through once more.
    """

    def __init__(self, content: AsyncGenerator[Any, None], interval_s: float, beat: bytes = KEEPALIVE,
                 render: Callable[[Any], bytes] | None = None, last: bytes | None = None, **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        # The body as given: Starlette's body_iterator is the same object, typed as any async iterable.
        self.source = content
        # Not `render`: that name is Response's own method (the body of a whole answer).
        self.interval_s, self.beat, self.render_item, self.last = interval_s, beat, render, last

    async def stream_response(self, send: Any) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        # A piece and a beat never interleave: each send holds the turn until it is written.
        turn = asyncio.Lock()
        beats = asyncio.create_task(self._beats(send, turn))
        # A beat's send that failed (the client went away) fails the body's next send too.
        beats.add_done_callback(lambda task: task.cancelled() or task.exception())
        try:
            render = self.render_item
            unyielded = 0
            async for item in self.source:
                piece = item if render is None else render(item)
                async with turn:
                    await send({"type": "http.response.body", "body": piece, "more_body": True})
                # A burst (a Loom stream's first read of every Node) neither waits for its body
                # nor for the socket: a turn of the loop now and then lets the server hear that
                # the client went away, which ends this task, instead of after the whole burst.
                unyielded += 1
                if unyielded == YIELD_EVERY:
                    unyielded = 0
                    await asyncio.sleep(0)
            if self.last is not None:
                async with turn:
                    await send({"type": "http.response.body", "body": self.last, "more_body": True})
        finally:
            # The body ended without a turn of the loop since its last piece went out, so a beat
            # that fell due meanwhile is cancelled before it can follow that piece ([DONE]).
            beats.cancel()
            # A client that went away cut the body at a piece: its own cleanup runs now.
            await self.source.aclose()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _beats(self, send: Any, turn: asyncio.Lock) -> None:
        clock = asyncio.get_running_loop().time
        next_beat = clock() + self.interval_s
        while True:
            await asyncio.sleep(max(next_beat - clock(), 0.0))
            async with turn:
                await send({"type": "http.response.body", "body": self.beat, "more_body": True})
            next_beat += self.interval_s
            if next_beat <= clock():  # a slow reader held us up: no burst of beats
                next_beat = clock() + self.interval_s


def event_stream(documents: AsyncGenerator[dict[str, Any], None], interval_s: float, **kwargs: Any) -> KeepaliveStream:
    """Each document as an event, a keepalive every `interval_s`, `data: [DONE]` last. A client
    that goes away closes `documents` at the event it cut: its cleanup runs then."""
    return KeepaliveStream(documents, interval_s, render=sse, last=DONE, media_type="text/event-stream", **kwargs)


def spaced_json(result: Awaitable[dict[str, Any]], interval_s: float,
                on_error: Callable[[errors.ApiError], dict[str, Any]], **kwargs: Any) -> KeepaliveStream:
    """An answer whose body is spaces every `interval_s`, then the JSON (or the error object)."""

    async def body() -> AsyncGenerator[bytes, None]:
        try:
            payload = await result
        except errors.ApiError as error:
            payload = on_error(error)
        yield json.dumps(payload, ensure_ascii=False).encode()

    return KeepaliveStream(body(), interval_s, beat=b" ", media_type="application/json", **kwargs)
