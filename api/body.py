"""Reading a request body: capped as it streams in, JSON whatever its type."""
from __future__ import annotations

import json
from typing import Any

from fastapi import Request

from api import errors

TOO_LARGE = "The request body is larger than {limit} bytes."
NOT_JSON = "The request body is not valid JSON: {detail}."


async def read_capped(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise errors.RequestTooLarge(TOO_LARGE.format(limit=limit))
    chunks, size = [], 0
    # A chunked body has no Content-Length: count as it arrives.
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise errors.RequestTooLarge(TOO_LARGE.format(limit=limit))
        chunks.append(chunk)
    return b"".join(chunks)


def parse_json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        detail = getattr(error, "msg", None) or str(error)
        raise errors.BadJson(NOT_JSON.format(detail=detail)) from error


async def read_json(request: Request, limit: int) -> Any:
    return parse_json(await read_capped(request, limit))
