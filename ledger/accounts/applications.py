"""Applications for access: the Apply form, an admin's approval or rejection, and an Invite's form.

An approval makes the User (with the Application's email), a password link of 7 days and the mail
"Your ACS Infra application is approved", in one transaction; an Invite's form approves at once.
"""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.accounts import access_links
from ledger.accounts import access_mail
from ledger.tokens import grants
from ledger.accounts.tables import EMAIL_MAX, Application, ApplicationStatus, Invite, LinkPurpose
from ledger.errors import ApplicationExists, EmailRefused, FormRefused, StatusChangeRefused
from ledger.accounts.mail import queue_mail
from ledger.accounts.team_mail import TeamMail, queue_application
from ledger.accounts.tables import User, UserTag

EXISTS = "An application from this email already exists."
NOT_AN_EMAIL = "Enter an email address, such as ada@example.org."
EMAIL_SHAPE = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
TEXT_MAX = {"name": 200, "organization": 200, "planned_usage": 10_000, "how_you_heard": 10_000,
            "links": 10_000, "expected_tokens": 100}
REQUIRED = ("name", "organization", "planned_usage")


@dataclass(frozen=True)
class ApplicationForm:
    """What the Apply form sends (the email apart: an Invite's form takes the Invite's)."""

    name: str
    organization: str
    planned_usage: str
    how_you_heard: str = ""
    links: str = ""
    expected_tokens: str = ""

    def checked(self) -> ApplicationForm:
        values = {name: str(getattr(self, name)).strip() for name in TEXT_MAX}
        for name in REQUIRED:
            if not values[name]:
                raise FormRefused(f"Fill in {name.replace('_', ' ')}.", name)
        for name, limit in TEXT_MAX.items():
            if len(values[name]) > limit:
                raise FormRefused(f"Write at most {limit} characters in {name.replace('_', ' ')}.", name)
        return ApplicationForm(**values)


def email_address(text: str) -> str:
    """An email in its one form: trimmed and lowercase."""
    email = text.strip().lower()
    if len(email) > EMAIL_MAX or not EMAIL_SHAPE.fullmatch(email):
        raise EmailRefused(NOT_AN_EMAIL)
    return email


async def user_by_email(session: AsyncSession, email: str) -> User | None:
    return (await session.exec(select(User).where(User.email == email))).first()


async def refuse_taken(session: AsyncSession, email: str) -> None:
    """A User, or an Application that is waiting or approved, has the email: a rejected one may apply again."""
    if await user_by_email(session, email) is not None:
        raise ApplicationExists(EXISTS)
    live = select(Application.id).where(Application.email == email,
                                        Application.status != ApplicationStatus.rejected)
    if (await session.exec(live)).first() is not None:
        raise ApplicationExists(EXISTS)


async def submit(session: AsyncSession, email: str, form: ApplicationForm, now: datetime, *,
                 team: TeamMail | None = None) -> Application:
    """The Application, waiting, and with `team` the team's mail about it, in one commit."""
    email, form = email_address(email), form.checked()
    await refuse_taken(session, email)
    application = Application(email=email, created_at=now, **vars(form))
    session.add(application)
    queue_application(session, team, application, now)
    await session.commit()
    return application


async def approve(session: AsyncSession, application: Application, now: datetime, base_url: str, *,
                  grant: int | None = None, decided_by: str = "") -> User:
    """The User, its password link and the approval mail; `grant` adds tokens to its Budget. Commits."""
    _refuse_decided(application)
    user = await _make_user(session, application.email, application.name)
    _decide(session, application, ApplicationStatus.approved, now, decided_by, user.id)
    token = await access_links.make_password_link(session, user.id, LinkPurpose.approval, now)
    queue_mail(session, user.email or "", *access_mail.approved(application.name, base_url, token), now)
    await _grant_and_commit(session, user.id, grant, "approval")
    return user


async def reject(session: AsyncSession, application: Application, now: datetime, base_url: str, *,
                 note: str = "", decided_by: str = "") -> Application:
    _refuse_decided(application)
    _decide(session, application, ApplicationStatus.rejected, now, decided_by, None, note)
    queue_mail(session, application.email, *access_mail.rejected(application.name, base_url, note), now)
    await session.commit()
    return application


async def accept_invite(session: AsyncSession, token: str, form: ApplicationForm, now: datetime) -> str:
    """An Invite's form: the User approved at once, with the Invite's tokens and tag. Returns the token of
    its password link (the page opens it at once, so no mail goes out). Commits."""
    form = form.checked()
    invite = await access_links.live_invite(session, token, now)
    await refuse_taken(session, invite.email)
    await access_links.use_invite(session, invite, now)
    user = await _make_user(session, invite.email, form.name)
    application = Application(email=invite.email, created_at=now, **vars(form))
    _decide(session, application, ApplicationStatus.approved, now, invite.created_by or "invite", user.id)
    _tag(session, user.id, invite)
    password_token = await access_links.make_password_link(
        session, user.id, LinkPurpose.set, now, access_links.INVITE_PASSWORD_LIFETIME)
    await _grant_and_commit(session, user.id, invite.tokens, "invite")
    return password_token


def _refuse_decided(application: Application) -> None:
    if application.status != ApplicationStatus.waiting:
        raise StatusChangeRefused(f"The application of {application.email} is {application.status.value} already.")


def _decide(session: AsyncSession, application: Application, status: ApplicationStatus, now: datetime,
            decided_by: str, user_id: uuid.UUID | None, note: str = "") -> None:
    application.status, application.decided_at, application.decided_by = status, now, decided_by
    application.user_id, application.note = user_id, note
    session.add(application)


async def _make_user(session: AsyncSession, email: str, name: str) -> User:
    user = User(name=await _free_name(session, name, email), email=email)
    session.add(user)
    await session.flush()
    return user


async def _free_name(session: AsyncSession, name: str, email: str) -> str:
    """User names are unique; two people may share one, so the second gets the email beside it."""
    for candidate in (name, f"{name} <{email}>"[:200], email):
        if (await session.exec(select(User.id).where(User.name == candidate))).first() is None:
            return candidate
    return f"{email} {uuid.uuid4().hex[:8]}"


def _tag(session: AsyncSession, user_id: uuid.UUID, invite: Invite) -> None:
    if invite.tag:
        session.add(UserTag(user_id=user_id, tag=invite.tag))


async def _grant_and_commit(session: AsyncSession, user_id: uuid.UUID, tokens: int | None, note: str) -> None:
    if tokens:
        await grants.grant(session, user_id, tokens, note=note)  # commits the whole approval
    else:
        await session.commit()


async def list_applications(session: AsyncSession, status: ApplicationStatus | None = None) -> list[Application]:
    query = select(Application).order_by(col(Application.created_at))
    if status is not None:
        query = query.where(Application.status == status)
    return list(await session.exec(query))


async def application_of_user(session: AsyncSession, user_id: uuid.UUID) -> Application | None:
    """The Application that made the User (approved, or an Invite's form), newest first; None for a User
    made otherwise (the command line, an admin's route)."""
    query = (select(Application).where(Application.user_id == user_id)
             .order_by(col(Application.created_at).desc()))
    return (await session.exec(query)).first()
