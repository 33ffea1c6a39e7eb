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
"""
from __future__ import annotations

import time
from typing import Any

from starlette.middleware import Middleware

from api.middleware import CALLER_ID, new_request_id
from api.server_timing import PROXY_HEADER

HEADER = b"x-request-id"


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


def middlewares() -> list[Middleware]:
    return [Middleware(RequestIdGuard)]
