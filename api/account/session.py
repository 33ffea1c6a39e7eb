"""`AccountDep`: the signed-in User of an /account route, from the `acs_session` cookie.

An Authorization header is refused (401 session_required): the account routes take a session, never an
API key, just as /v1 takes a key, never a session. A session is renewed at most once a day, when it is
used: its cookie then goes out again with 30 more days. A route that returns a Response object of its
own should return a dict instead, or the renewed cookie is lost with the dependency's response.
The ledger's part is `domain/account/sessions.py`.
"""
from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, Response

from domain import errors
from api.account.cookies import SESSION_COOKIE, set_session_cookie
from domain.account import sessions
from domain.account.sessions import AccountUser
from domain.services import Services


def _services(request: Request) -> Services:
    return request.app.state.services


async def live_session(request: Request) -> AccountUser:
    """The request's working session, or 401 session_ended."""
    return await sessions.live_session(_services(request), request.cookies.get(SESSION_COOKIE))


async def renew_if_due(request: Request, response: Response, account: AccountUser) -> None:
    if not account.renewal_due:
        return
    services = _services(request)
    now = services.clock()
    expires_at = await sessions.renew(services, account.session_id, now)
    set_session_cookie(request, response, request.cookies[SESSION_COOKIE], expires_at, now)


async def require_account(request: Request, response: Response) -> AccountUser:
    if request.headers.get("authorization") is not None:
        raise errors.SessionRequired(errors.SESSION_REQUIRED_MESSAGE)
    account = await live_session(request)
    await renew_if_due(request, response, account)
    return account


AccountDep = Annotated[AccountUser, Depends(require_account)]


def with_renewal(made: Response, response: Response) -> Response:
    """A route's own Response `made`, with the cookies that the route's dependencies set on
    `response` (the route's Response parameter, the one AccountDep renews the session on)."""
    for name, value in response.raw_headers:
        if name == b"set-cookie":
            made.raw_headers.append((name, value))
    return made
