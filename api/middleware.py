"""ASGI middleware: the request id on every answer, and gzip for whole JSON answers."""
from __future__ import annotations

import gzip
import re
import secrets
from typing import Any

from domain.timing import stage

CALLER_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
GZIP_MIN_BYTES = 500


def new_request_id() -> str:
    return f"req_{secrets.token_hex(16)}"


def _header(scope: dict, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


class RequestIdMiddleware:
    """Keeps the caller's X-Request-Id when it is 1-64 of [A-Za-z0-9_-]."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        caller = _header(scope, b"x-request-id")
        request_id = caller if caller and CALLER_ID.match(caller) else new_request_id()
        scope.setdefault("state", {})["request_id"] = request_id

        async def send_with_id(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"x-request-id"]
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_id)


class GzipJsonMiddleware:
    """Compresses a JSON answer of 500 bytes or more that comes in one piece.

    Streams (SSE, and the spaced long answer) pass untouched: compressing
    them would hold back the keepalives that keep the connection alive.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        accepts = scope["type"] == "http" and accepts_gzip(_header(scope, b"accept-encoding") or "")
        if not accepts:
            return await self.app(scope, receive, send)
        start: dict | None = None

        async def maybe_compress(message: dict) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
                return
            if start is None:
                return await send(message)
            head, start = start, None
            if not _compressible(head, message):
                await send(head)
                return await send(message)
            with stage("gzip"):
                data = gzip.compress(message.get("body", b""), compresslevel=5)
            await send(_compressed_start(head, len(data)))
            await send({**message, "body": data})

        await self.app(scope, receive, maybe_compress)


def accepts_gzip(accept_encoding: str) -> bool:
    """gzip (or *) listed without q=0, as RFC 9110 reads Accept-Encoding."""
    for item in accept_encoding.split(","):
        coding, _, params = item.strip().partition(";")
        if coding.strip().lower() not in ("gzip", "*"):
            continue
        q = params.strip().lower().removeprefix("q=")
        try:
            return not params.strip() or float(q) > 0
        except ValueError:
            return False
    return False


def _compressible(start: dict, body: dict) -> bool:
    if body.get("more_body") or len(body.get("body", b"")) < GZIP_MIN_BYTES:
        return False
    headers = {k.lower(): v for k, v in start.get("headers", [])}
    return b"json" in headers.get(b"content-type", b"") and b"content-encoding" not in headers


def _compressed_start(start: dict, size: int) -> dict:
    headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
    headers += [(b"content-encoding", b"gzip"), (b"content-length", str(size).encode()), (b"vary", b"Accept-Encoding")]
    return {**start, "headers": headers}
