"""`Server-Timing` on the answer of each timed request (POST /v1/completions): this ASGI
middleware gives the request its stage recorder (domain/timing.py, which names the stages)
and sends what it recorded with the answer's first bytes."""
from __future__ import annotations

import time
from typing import Any

from domain.timing import Timings, recording

# Serve's HTTP proxy stamps its wall time here (cluster/proxy_middleware.py): the `proxy` stage.
PROXY_HEADER = b"x-acs-proxy-start"
TIMED_PATHS = frozenset({"/v1/completions"})
# A proxy stamp further off than this is a wrong clock or a caller's header: left out.
PROXY_PLAUSIBLE_S = 60.0


def _proxy_seconds(scope: dict) -> float | None:
    for key, value in scope.get("headers", []):
        if key.lower() == PROXY_HEADER:
            try:
                spent = time.time() - float(value.decode("latin-1"))
            except ValueError:
                return None
            return spent if 0.0 <= spent < PROXY_PLAUSIBLE_S else None
    return None


def _route_path(scope: dict) -> str:
    """The path below the application's route prefix (Serve puts the prefix in both)."""
    path, root = scope.get("path", ""), scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


class ServerTimingMiddleware:
    """Records the stages of a timed request and sends them as `Server-Timing`."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or _route_path(scope) not in TIMED_PATHS:
            return await self.app(scope, receive, send)
        timings = Timings()
        proxy = _proxy_seconds(scope)
        if proxy is not None:
            timings.add("proxy", proxy)

        async def send_with_timing(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), (b"server-timing", timings.header().encode()),
                           (b"timing-allow-origin", b"*")]
                message = {**message, "headers": headers}
            await send(message)

        with recording(timings):
            await self.app(scope, receive, send_with_timing)
