"""The API key check (before the body is read), the per-key rate limits, and the admin check.

The dependencies read the Authorization header and the App's cookies; the ledger's part is
`domain/auth.py`.
"""
from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from domain import errors
from api.account.csrf import csrf_ok
from api.account.session import live_session
from api.client_address import client_address
from api.account.cookies import SESSION_COOKIE
from domain import auth
from domain.auth import Admin
from domain.services import Services
from domain.timing import stage
from ledger.accounts.keys import Principal  # the type of ApiKeyDep, WorkKeyDep


def services_of(request: Request) -> Services:
    return request.app.state.services


async def _authenticate(request: Request) -> Principal:
    services = services_of(request)
    try:
        principal = await auth.principal_of(services, request.headers.get("authorization"))
    except errors.AuthError:
        # 60 a minute from one address with a missing, wrong or revoked key.
        await services.traffic.check_address(client_address(request))
        raise
    request.state.principal = principal
    return principal


async def require_principal(request: Request) -> Principal:
    """A /v1 route that starts no work: the key's "other" bucket."""
    principal = await _authenticate(request)
    await services_of(request).traffic.check_key(str(principal.key_id), "other")
    return principal


async def require_work_principal(request: Request) -> Principal:
    """A route that starts work (Completions, Jobs, harvests, Branches): the "work" bucket."""
    with stage("auth"):
        principal = await _authenticate(request)
        await services_of(request).traffic.check_key(str(principal.key_id), "work")
    return principal


ApiKeyDep = Annotated[Principal, Depends(require_principal)]
WorkKeyDep = Annotated[Principal, Depends(require_work_principal)]


async def require_admin(request: Request) -> Admin:
    """A route under /v1/admin: a User whose role is admin, by an API key or, without an Authorization
    header, by the App's session (whose requests that change something carry the CSRF token)."""
    if request.headers.get("authorization") is None and request.cookies.get(SESSION_COOKIE):
        return await _admin_of_session(request)
    principal = await require_principal(request)
    return await auth.admin_of_key(services_of(request), principal)


async def _admin_of_session(request: Request) -> Admin:
    account = await live_session(request)
    if not csrf_ok(request):
        raise errors.CsrfFailed(errors.CSRF_FAILED_MESSAGE)
    return auth.admin_of_account(account)


AdminDep = Annotated[Admin, Depends(require_admin)]
