"""Mail to the team (ACS_TEAM_EMAIL): each new Application and each new token request, so that an admin
hears of it without watching the Admin page (spec: "Decide token requests": each new request sends the
team an email with the answers).

The caller queues it in the transaction that makes the Application or the request, through the same
outbox as the Users' mail: both are kept or both lost, and a crash before the send leaves it for the
Runner. The mails carry what the person wrote and a link to the Admin page's tab, never a token.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.accounts.access_mail import SIGN_OFF, app_url
from ledger.accounts.mail import queue_mail
from ledger.accounts.tables import Application, User
from ledger.tokens.tables import TokenRequest

APPLICATIONS_TAB = "/admin?tab=applications"
TOKEN_REQUESTS_TAB = "/admin?tab=token-requests"
NOT_ANSWERED = "Not answered"
SUBJECT_NAME_MAX = 80


@dataclass(frozen=True)
class TeamMail:
    """Where the team's mail goes, and the App's public URL that its links start with."""

    to: str
    base: str


def _one_line(text: str, limit: int = SUBJECT_NAME_MAX) -> str:
    """A name fit for a Subject: a line break there would make the message unsendable."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _answers(pairs: list[tuple[str, str]]) -> str:
    return "\n\n".join(f"{label}:\n{value.strip() or NOT_ANSWERED}" for label, value in pairs)


def application_words(application: Application, base: str) -> tuple[str, str]:
    who = _one_line(application.name)
    subject = f"New application: {who} ({_one_line(application.organization)})"
    answers = _answers([("Planned usage", application.planned_usage), ("How they heard", application.how_you_heard),
                        ("Links", application.links), ("Expected tokens", application.expected_tokens)])
    return subject, (
        f"A new Application for ACS Infra is waiting.\n\nName: {application.name}\nEmail: {application.email}\n"
        f"Organization: {application.organization}\n\n{answers}\n\n"
        f"Approve or reject it on Admin, Applications:\n{app_url(base, APPLICATIONS_TAB)}" + SIGN_OFF)


def token_request_words(request: TokenRequest, user: User, organization: str, base: str) -> tuple[str, str]:
    subject = f"New token request: {request.tokens:,} tokens from {_one_line(user.name)}"
    where = f"Organization: {organization}\n" if organization else ""
    answers = _answers([("Project", request.project), ("Planned usage", request.planned_usage),
                        ("How they got the number", request.how_you_got_the_number),
                        ("Results", request.results), ("Links", request.links),
                        ("When they need them", request.when_needed)])
    return subject, (
        f"A User asks for more tokens.\n\nName: {user.name}\nEmail: {user.email or 'None'}\n{where}\n"
        f"Tokens: {request.tokens:,}\nModels: {', '.join(request.models)}\n\n{answers}\n\n"
        f"Approve or reject it on Admin, Token requests:\n{app_url(base, TOKEN_REQUESTS_TAB)}" + SIGN_OFF)


def queue_application(session: AsyncSession, team: TeamMail | None, application: Application,
                      now: datetime) -> None:
    if team is not None:
        queue_mail(session, team.to, *application_words(application, team.base), now)


async def queue_token_request(session: AsyncSession, team: TeamMail | None, request: TokenRequest,
                              now: datetime) -> None:
    if team is None:
        return
    user = await session.get(User, request.user_id)
    if user is None:
        return  # the caller locked the User's row: it is there
    organization = await _organization_of(session, user)
    queue_mail(session, team.to, *token_request_words(request, user, organization, team.base), now)


async def _organization_of(session: AsyncSession, user: User) -> str:
    """The organization of the User's Application, newest first; a User made by the command line has none."""
    query = select(Application.organization).where(Application.user_id == user.id)
    return (await session.exec(query.order_by(col(Application.created_at).desc()))).first() or ""
