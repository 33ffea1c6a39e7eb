"""The App's two cookies: `acs_session` (HttpOnly, SameSite=Lax) holds the session's token, `acs_csrf`
(readable by the App's JS, SameSite=Strict) the double-submit CSRF token. Both use path `/`, as the App
may be mounted under a prefix, and are Secure when the request came over https."""
from __future__ import annotations

import secrets
from datetime import datetime

from fastapi import Request, Response

from api.client_address import came_over_https

SESSION_COOKIE = "acs_session"
CSRF_COOKIE = "acs_csrf"
CSRF_HEADER = "X-CSRF-Token"
COOKIE_MAX_AGE_S = 30 * 24 * 3600


def is_secure(request: Request) -> bool:
    configured = request.app.state.services.settings.session_cookie_secure
    if configured is not None:
        return configured
    # Behind a proxy that ends TLS (one that ACS_TRUSTED_PROXIES names), the request arrives over http
    # with the original scheme in a header.
    return came_over_https(request.scope)


def set_session_cookie(request: Request, response: Response, token: str, expires_at: datetime, now: datetime) -> None:
    max_age = max(0, int((expires_at - now).total_seconds()))
    response.set_cookie(SESSION_COOKIE, token, max_age=max_age, path="/", httponly=True, samesite="lax",
                        secure=is_secure(request))


def clear_session_cookie(request: Request, response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="lax", secure=is_secure(request))


def set_csrf_cookie(request: Request, response: Response) -> str:
    token = secrets.token_urlsafe(32)
    response.set_cookie(CSRF_COOKIE, token, max_age=COOKIE_MAX_AGE_S, path="/", httponly=False,
                        samesite="strict", secure=is_secure(request))
    return token
