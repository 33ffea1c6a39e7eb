"""How a Completion goes over HTTP: SSE with keepalives, or JSON that
starts with spaces when Inference takes longer than the long wait."""
from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator, Awaitable, Callable

from api import errors

KEEPALIVE = b": keepalive\n\n"
DONE = b"data: [DONE]\n\n"


def sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


async def with_keepalives(source: AsyncIterator[bytes], interval_s: float,
                          beat: bytes = KEEPALIVE) -> AsyncIterator[bytes]:
    """Pass `source` through, adding `beat` every `interval_s` from the start.

    The cadence holds while items flow too (the spec: a keepalive every 5 s
    for the whole stream), and a beat goes only between two items, so it
    never splits an SSE event.
    """
    queue: asyncio.Queue = asyncio.Queue(maxsize=1)
    end = object()

    async def pump() -> None:
        try:
            async for item in source:
                await queue.put(item)
            await queue.put(end)
        except BaseException as error:  # noqa: BLE001 - re-raised by the consumer
            await queue.put(error)

    task = asyncio.create_task(pump())
    clock = asyncio.get_running_loop().time
    next_beat = clock() + interval_s
    try:
        while True:
            if clock() >= next_beat:
                # The source's next item first, where it is ready: a beat due while the reader took
                # the last item ([DONE]) must not follow it. One turn of the loop lets the pump hand
                # over what it holds, its end among them.
                await asyncio.sleep(0)
                if queue.empty():
                    yield beat
                    next_beat += interval_s
                    if next_beat <= clock():  # a slow reader held us up: no burst of beats
                        next_beat = clock() + interval_s
                    continue
                item = queue.get_nowait()
            else:
                try:
                    item = await asyncio.wait_for(queue.get(), next_beat - clock())
                except asyncio.TimeoutError:
                    continue
            if item is end:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            await aclose()


async def spaced_json(result: Awaitable[dict[str, Any]], interval_s: float,
                      on_error: Callable[[errors.ApiError], dict[str, Any]]) -> AsyncIterator[bytes]:
    """A body that is spaces every `interval_s`, then the JSON (or the error object)."""

    async def body() -> AsyncIterator[bytes]:
        try:
            payload = await result
        except errors.ApiError as error:
            payload = on_error(error)
        yield json.dumps(payload, ensure_ascii=False).encode()

    async for piece in with_keepalives(body(), interval_s, beat=b" "):
        yield piece
