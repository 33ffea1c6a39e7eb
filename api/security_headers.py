"""Security headers on every answer, the App's pages and the API's alike.

- `Referrer-Policy: no-referrer`: tokens travel in query strings (password
  links, signed harvest links), so no page passes its address on to the
  places it links to or loads from.
- `X-Content-Type-Options: nosniff`: a browser takes each answer as the type
  it says it is.
- `Content-Security-Policy: default-src 'none'; frame-ancestors 'none'` where
  the answer sets none of its own: nothing an API answer holds may run as a
  page. The App's pages set their own policy (api/webapp/policy.py).
- `Strict-Transport-Security` when the request came over https: to this
  server, or to a proxy in ACS_TRUSTED_PROXIES that ended TLS and says so in
  X-Forwarded-Proto. A browser ignores it over plain http anyway (RFC 6797
  8.1), and a self-hoster testing over http must not be pinned to https by it.
"""
from __future__ import annotations

from typing import Any

from api.client_address import came_over_https

HSTS = (b"strict-transport-security", b"max-age=31536000; includeSubDomains")
DEFAULTS = (
    (b"referrer-policy", b"no-referrer"),
    (b"x-content-type-options", b"nosniff"),
    (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'"),
)


def with_defaults(headers: list[tuple[bytes, bytes]], defaults: tuple[tuple[bytes, bytes], ...]) -> list[tuple[bytes, bytes]]:
    """The answer's headers, plus each default that the answer does not set itself."""
    present = {key.lower() for key, _ in headers}
    return [*headers, *(item for item in defaults if item[0] not in present)]


class SecurityHeadersMiddleware:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        defaults = DEFAULTS + ((HSTS,) if came_over_https(scope) else ())

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": with_defaults(list(message.get("headers", [])), defaults)}
            await send(message)

        await self.app(scope, receive, send_with_headers)
