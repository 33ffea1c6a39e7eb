"""Middleware for Serve's HTTP servers (RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH): its proxy
actor's and, under direct ingress (the embedded default: cluster/ray_env.py), the ingress
replica's own.

Serve's HTTP server always runs its own request-id middleware: it passes on any
caller X-Request-Id, makes a UUID otherwise, and appends X-Request-ID to
every answer, next to the one the API sets. This guard sits outside it, so
the id follows the spec (the caller's only when it has 1-64 of
[A-Za-z0-9_-]) and every answer carries exactly one X-Request-Id.

It also stamps the server's wall time on the request (`x-acs-proxy-start`,
replacing any caller's), from which the ingress's Server-Timing counts the
`proxy` stage (api/server_timing.py): under direct ingress, the time from the
replica's HTTP server to the routes.

Inside that guard, `ServeErrorGuard` turns Serve's own error answers into the spec's error
object. When an ingress replica dies with a request inside it (a kill -9, a node lost), the
proxy answers a plain-text `500 Internal Server Error` that the API never wrote; the spec says
every error answer is the error object, and a 500 there is exactly its `internal_error`: the
API failed and does not know how much of the work ran (the chaos soak, bench/NOTES.md).
"""
from __future__ import annotations

import json
import logging
import time
from typing import Any

from starlette.middleware import Middleware

from api.errors_http import INTERNAL
from api.middleware import CALLER_ID, new_request_id
from api.server_timing import PROXY_HEADER
from domain.errors import InternalError

HEADER = b"x-request-id"

log = logging.getLogger(__name__)


class RequestIdGuard:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        stamp = f"{time.time():.6f}".encode()
        headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() not in (HEADER, PROXY_HEADER)]
        caller = [v.decode("latin-1") for k, v in scope.get("headers", []) if k.lower() == HEADER]
        request_id = caller[0] if len(caller) == 1 and CALLER_ID.match(caller[0]) else new_request_id()
        scope = {**scope, "headers": headers + [(HEADER, request_id.encode()), (PROXY_HEADER, stamp)]}

        async def send_one_id(message: dict) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() != HEADER]
                message = {**message, "headers": kept + [(HEADER, request_id.encode())]}
            await send(message)

        await self.app(scope, receive, send_one_id)


class ServeErrorGuard:
    """Serve's own error answers become the spec's 500 `internal_error` with the request's id:
    a 5xx that is not JSON and not a stream (the API writes neither such answer), and no answer
    at all. When the replica died, Serve's proxy sends nothing for a 500
    (`send_http_response_on_exception` answers only its 408, 429 and 503) and the HTTP server then
    writes its own text/plain 500; an exception before the answer starts gets the same from it."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = replaced = False

        async def send_error_object(message: dict) -> None:
            nonlocal started, replaced
            if message["type"] == "http.response.start":
                started = True
                replaced = _is_serves_own_error(message)
                if replaced:
                    return await _send_internal_error(send, _request_id(scope))
            if not replaced:
                await send(message)

        try:
            await self.app(scope, receive, send_error_object)
        except Exception:
            if started:
                raise  # the answer began: the connection's end is all a client can get now
            log.exception("request %s failed in Serve's proxy", _request_id(scope))
        if not started:
            await _send_internal_error(send, _request_id(scope))


def _is_serves_own_error(start: dict) -> bool:
    if start["status"] < 500:
        return False
    content_type = dict((k.lower(), v) for k, v in start.get("headers", [])).get(b"content-type", b"")
    return not content_type.startswith((b"application/json", b"text/event-stream"))


def _request_id(scope: dict) -> str | None:
    ids = [v.decode("latin-1") for k, v in scope.get("headers", []) if k.lower() == HEADER]
    return ids[0] if ids else None


async def _send_internal_error(send: Any, request_id: str | None) -> None:
    error = InternalError(INTERNAL)
    body = json.dumps(error.body(request_id)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in error.headers().items()]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def middlewares() -> list[Middleware]:
    # Serve wraps its app in each in turn (ray.serve._private.http_util._apply_middlewares), so the
    # last is the outermost: the id guard sees every answer, the error object's too, and the error
    # guard reads the id that the id guard settled.
    return [Middleware(ServeErrorGuard), Middleware(RequestIdGuard)]
