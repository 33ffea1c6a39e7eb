"""Counts each HTTP answer with its times (`Counts.observe_request`, the app's services' counts)."""
from __future__ import annotations

import asyncio
import time
from typing import Any

from domain.metrics.request_model import request_model

UNMATCHED = "unmatched"  # no route took the path: raw paths would make a series each
CLIENT_CLOSED = "499"  # nginx's status for a client that left before the answer started
# Prometheus's own scrapes would outnumber the requests of a quiet platform.
NOT_COUNTED = {"/metrics"}


def route_template(scope: dict) -> str:
    """The path as the router declared it (`/v1/looms/{loom_id}`), set on the scope when a route matched."""
    return getattr(scope.get("route"), "path", None) or UNMATCHED


class RequestMetricsMiddleware:
    """Sits outside the last-resort error handler, so the 500 it answers is counted too."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        status, first_byte_s = CLIENT_CLOSED, None

        async def timed_send(message: dict) -> None:
            nonlocal status, first_byte_s
            if message["type"] == "http.response.start":
                status, first_byte_s = str(message["status"]), time.perf_counter() - started
            await send(message)

        with request_model() as model:
            try:
                await self.app(scope, receive, timed_send)
            except asyncio.CancelledError:
                raise  # the client left: counted below with what had gone out
            except Exception:
                if first_byte_s is None:
                    status = "500"  # the server answers it
                raise
            finally:
                route = route_template(scope)
                if route not in NOT_COUNTED:
                    # Starlette puts the app on the scope; its services are set before it serves.
                    counts = scope["app"].state.services.counts
                    counts.observe_request(scope["method"], route, status, model.id, first_byte_s,
                                           time.perf_counter() - started)
