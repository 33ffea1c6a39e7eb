"""Token requests (spec: "Ask for more tokens"): a User asks in the App, an admin approves with a Grant or
rejects. The App's routes and the admin's command line share these."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.tokens import grants
from ledger.errors import LedgerError, NotFound, TokenRequestRefused, TokenRequestWaiting
from ledger.accounts import team_mail
from ledger.accounts.tables import User
from ledger.accounts.team_mail import TeamMail
from domain.operations import arguments
from domain.operations.documents import iso
from ledger.tokens.tables import PROJECT_MAX, TokenRequest, TokenRequestStatus

TOKENS_UNREADABLE = "Write the tokens as a number, such as 50K or 2.5M."
WAITING = "You have a request waiting. Once an admin decides it, you can ask again."
GRANT_NOTE = "token request"
ANSWER_MAX = 10_000  # characters of one optional answer, or of the planned usage
# What the App says under a required question left empty.
MISSING = {
    "tokens": "Enter the number of tokens, such as 50K or 2.5M.",
    "models": "Choose each model that the work needs.",
    "project": "Enter the project.",
    "planned_usage": "Enter the planned usage.",
}
OPTIONAL = ("how_you_got_the_number", "results", "links", "when_needed")


@dataclass(frozen=True)
class TokenRequestForm:
    """The questions of Request more tokens, as the User answered them (tokens as written)."""

    tokens: str | int
    models: list[str]
    project: str
    planned_usage: str
    how_you_got_the_number: str = ""
    results: str = ""
    links: str = ""
    when_needed: str = ""


@dataclass(frozen=True)
class RequestLine:
    """A request with its User, as the admin's list shows it."""

    request: TokenRequest
    user_name: str
    user_email: str | None


def read_tokens(value: str | int) -> int:
    try:
        return arguments.tokens(value, least=1)
    except LedgerError as error:
        unreadable = "not a whole number" in str(error)
        raise TokenRequestRefused(TOKENS_UNREADABLE if unreadable else str(error), "tokens") from None


def _answer(value: str, field: str, limit: int = ANSWER_MAX) -> str:
    value = value.strip()
    if len(value) > limit:
        raise TokenRequestRefused(f"Write at most {limit:,} characters here; this has {len(value):,}.", field)
    return value


def _required(form: TokenRequestForm) -> None:
    for field in MISSING:
        value = getattr(form, field)
        if (isinstance(value, str) and not value.strip()) or value == []:
            raise TokenRequestRefused(MISSING[field], field)


def _new_request(user_id: uuid.UUID, form: TokenRequestForm, now: datetime) -> TokenRequest:
    _required(form)
    optional = {field: _answer(getattr(form, field), field) for field in OPTIONAL}
    return TokenRequest(user_id=user_id, created_at=now, tokens=read_tokens(form.tokens),
                        models=list(dict.fromkeys(form.models)), project=_answer(form.project, "project", PROJECT_MAX),
                        planned_usage=_answer(form.planned_usage, "planned_usage"),
                        how_you_got_the_number=optional["how_you_got_the_number"], results=optional["results"],
                        links=optional["links"], when_needed=optional["when_needed"])


async def ask(session: AsyncSession, user_id: uuid.UUID, form: TokenRequestForm, now: datetime, *,
              team: TeamMail | None = None) -> TokenRequest:
    """Record a request, and with `team` the team's mail about it, in one commit; a User with one
    waiting gets TokenRequestWaiting."""
    request = _new_request(user_id, form, now)
    # The User's row lock orders two requests sent at once; the unique index backs it.
    await session.exec(select(User.id).where(User.id == user_id).with_for_update())
    if await _waiting_of(session, user_id) is not None:
        raise TokenRequestWaiting(WAITING)
    # Before the add: its reads would flush the request, and the unique index's refusal must come at the commit.
    await team_mail.queue_token_request(session, team, request, now)
    session.add(request)
    try:
        await session.commit()
    except IntegrityError:
        await session.rollback()
        raise TokenRequestWaiting(WAITING) from None
    return request


async def _waiting_of(session: AsyncSession, user_id: uuid.UUID) -> TokenRequest | None:
    query = select(TokenRequest).where(TokenRequest.user_id == user_id,
                                       TokenRequest.status == TokenRequestStatus.waiting)
    return (await session.exec(query)).first()


async def requests_of(session: AsyncSession, user_id: uuid.UUID) -> list[TokenRequest]:
    """The User's requests, newest first (Your requests)."""
    query = select(TokenRequest).where(TokenRequest.user_id == user_id)
    return list(await session.exec(query.order_by(col(TokenRequest.created_at).desc())))


async def request_lines(session: AsyncSession, status: TokenRequestStatus | None = None) -> list[RequestLine]:
    """Every User's requests, oldest first: the admin decides the longest waiting first."""
    query = select(TokenRequest, User).join(User, col(User.id) == col(TokenRequest.user_id))
    if status is not None:
        query = query.where(TokenRequest.status == status)
    query = query.order_by(col(TokenRequest.created_at))
    return [RequestLine(request, user.name, getattr(user, "email", None))
            for request, user in await session.exec(query)]


async def request_line(session: AsyncSession, request_id: uuid.UUID) -> RequestLine:
    """One request with its User, as `request_lines` lists it."""
    query = select(TokenRequest, User).join(User, col(User.id) == col(TokenRequest.user_id))
    found = (await session.exec(query.where(TokenRequest.id == request_id))).first()
    if found is None:
        raise NotFound(f"No token request has the id {request_id}.")
    request, user = found
    return RequestLine(request, user.name, getattr(user, "email", None))


def line_document(line: RequestLine) -> dict[str, Any]:
    """A request with its User and every answer, as `token-request list --json` prints it and the admin
    routes answer it."""
    request = line.request
    return {"id": str(request.id), "user": {"id": str(request.user_id), "name": line.user_name,
                                            "email": line.user_email},
            "created_at": iso(request.created_at), "tokens": request.tokens, "models": request.models,
            "project": request.project, "planned_usage": request.planned_usage,
            **{name: getattr(request, name) for name in OPTIONAL},
            "status": request.status.value, "granted": request.granted, "note": request.note,
            "decided_at": iso(request.decided_at), "decided_by": request.decided_by}


async def _waiting_request(session: AsyncSession, request_id: uuid.UUID) -> TokenRequest:
    request = await session.get(TokenRequest, request_id, with_for_update=True)
    if request is None:
        raise NotFound(f"No token request has the id {request_id}.")
    if request.status != TokenRequestStatus.waiting:
        raise LedgerError(f"The token request {request_id} is {request.status.value} already.")
    return request


async def approve(session: AsyncSession, request_id: uuid.UUID, *, tokens: int | None, decided_by: str,
                  now: datetime) -> TokenRequest:
    """Approve with the tokens asked for, or another number: a Grant to the User's Budget, in one commit."""
    request = await _waiting_request(session, request_id)
    granted = request.tokens if tokens is None else arguments.tokens(tokens, least=1)
    request.status, request.granted = TokenRequestStatus.approved, granted
    request.decided_at, request.decided_by = now, decided_by
    session.add(request)
    await grants.grant(session, request.user_id, granted, note=GRANT_NOTE)  # commits the decision with it
    return request


async def reject(session: AsyncSession, request_id: uuid.UUID, *, note: str, decided_by: str,
                 now: datetime) -> TokenRequest:
    """Reject, with a note that the User reads under the request."""
    request = await _waiting_request(session, request_id)
    request.status, request.note = TokenRequestStatus.rejected, arguments.short_text(note, "A rejection's note")
    request.decided_at, request.decided_by = now, decided_by
    session.add(request)
    await session.commit()
    return request
