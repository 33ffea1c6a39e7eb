"""The API key check (before the body is read), the per-key rate limits, and the admin check."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request

from domain import errors
from api.account.cookies import SESSION_COOKIE
from api.account.csrf import csrf_ok
from api.account.session import live_session
from api.client_address import client_address
from domain.error_mapping import key_refusal_error
from domain.timing import stage
from ledger.store import driver_sql
from ledger.errors import KeyRefused
from ledger.accounts.keys import Principal, authenticate, authenticate_on
from ledger.accounts.tables import Role
from domain.operations.users import admin_name


def services_of(request: Request) -> Any:
    return request.app.state.services


async def _authenticate(request: Request) -> Principal:
    services = services_of(request)
    authorization = request.headers.get("authorization")
    engine = driver_sql.driven_engine(services.sessions)
    try:
        if engine is not None:
            principal = await authenticate_on(engine, services.sessions, authorization)
        else:
            async with services.sessions() as session:
                principal = await authenticate(session, authorization)
    except KeyRefused as refusal:
        # 60 a minute from one address with a missing, wrong or revoked key.
        await services.traffic.check_address(client_address(request))
        raise key_refusal_error(refusal) from None
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


@dataclass(frozen=True)
class Admin:
    """The admin that an admin route acts for: its name is recorded on the changes it makes."""

    user_id: uuid.UUID
    name: str


async def require_admin(request: Request) -> Admin:
    """A route under /v1/admin: a User whose role is admin, by an API key or, without an Authorization
    header, by the App's session (whose requests that change something carry the CSRF token)."""
    if request.headers.get("authorization") is None and request.cookies.get(SESSION_COOKIE):
        return await _admin_of_session(request)
    principal = await require_principal(request)
    async with services_of(request).sessions() as session:
        name = await admin_name(session, principal.user_id)
    if name is None:
        raise errors.AdminOnly(errors.ADMIN_ONLY_MESSAGE)
    return Admin(principal.user_id, name)


async def _admin_of_session(request: Request) -> Admin:
    found = await live_session(request)
    if not csrf_ok(request):
        raise errors.CsrfFailed(errors.CSRF_FAILED_MESSAGE)
    if found.user.role != Role.admin:
        raise errors.AdminOnly(errors.ADMIN_ONLY_MESSAGE)
    return Admin(found.user.id, found.user.name)


AdminDep = Annotated[Admin, Depends(require_admin)]
