"""The double-submit CSRF check of every /account request that is not a read.

A page of another site can make the browser send our cookies, but cannot read them: only the App's
own JS can copy `acs_csrf` into the `X-CSRF-Token` header.
"""
from __future__ import annotations

import secrets

from fastapi import Request

from domain import errors
from api.account.cookies import CSRF_COOKIE, CSRF_HEADER

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def csrf_ok(request: Request) -> bool:
    if request.method in SAFE_METHODS:
        return True
    cookie, header = request.cookies.get(CSRF_COOKIE, ""), request.headers.get(CSRF_HEADER, "")
    return bool(cookie) and secrets.compare_digest(cookie.encode(), header.encode())


async def require_csrf(request: Request) -> None:
    """A dependency of every /account router (api/app.py adds it to each), signed in or not."""
    if not csrf_ok(request):
        raise errors.CsrfFailed(errors.CSRF_FAILED_MESSAGE)
