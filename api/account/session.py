"""`AccountDep`: the signed-in User of an /account route, from the `acs_session` cookie.

An Authorization header is refused (401 session_required): the account routes take a session, never an
API key, just as /v1 takes a key, never a session. A session is renewed at most once a day, when it is
used: its cookie then goes out again with 30 more days. A route that returns a Response object of its
own should return a dict instead, or the renewed cookie is lost with the dependency's response.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request, Response

from domain import errors
from api.account.cookies import SESSION_COOKIE, set_session_cookie
from ledger.accounts import app_sessions
from ledger.accounts.tables import Role


@dataclass(frozen=True)
class AccountUser:
    user_id: uuid.UUID
    email: str
    name: str
    role: Role
    session_id: uuid.UUID


def _services(request: Request) -> Any:
    return request.app.state.services


async def live_session(request: Request) -> app_sessions.LiveSession:
    """The request's working session, or 401 session_ended."""
    token = request.cookies.get(SESSION_COOKIE)
    services = _services(request)
    found = None
    if token:
        async with services.sessions() as session:
            found = await app_sessions.find(session, token, services.clock())
    if found is None:
        raise errors.SessionEnded(errors.SESSION_ENDED_MESSAGE)
    return found


async def renew_if_due(request: Request, response: Response, found: app_sessions.LiveSession) -> None:
    if not found.renewal_due:
        return
    services = _services(request)
    now = services.clock()
    async with services.ledger.write_sessions() as session:
        expires_at = await app_sessions.renew(session, found.session_id, now)
        await session.commit()
    set_session_cookie(request, response, request.cookies[SESSION_COOKIE], expires_at, now)


async def require_account(request: Request, response: Response) -> AccountUser:
    if request.headers.get("authorization") is not None:
        raise errors.SessionRequired(errors.SESSION_REQUIRED_MESSAGE)
    found = await live_session(request)
    await renew_if_due(request, response, found)
    user = found.user
    return AccountUser(user.id, user.email or "", user.name, user.role, found.session_id)


AccountDep = Annotated[AccountUser, Depends(require_account)]
