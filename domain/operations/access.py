"""The admin's side of access: Applications (list, approve, reject), Invites, and a User's password link.
The command line calls these (cluster/admin_cli/access.py); the admin routes will call the same."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.accounts import access_links
from ledger.accounts import access_mail
from ledger.accounts import applications
from ledger.accounts import sign_in
from ledger.accounts.tables import Application, ApplicationStatus, LinkPurpose
from ledger.errors import ApplicationExists, LedgerError, NotFound
from ledger.accounts.tables import Standing, User
from domain.operations import arguments
from domain.operations.documents import iso

EMAIL_TAKEN = "A User or an Application has the email {email} already."


async def find_application(session: AsyncSession, who: str) -> Application:
    """By id, or by email: then the newest Application of that address."""
    try:
        found = await session.get(Application, uuid.UUID(who))
    except ValueError:
        query = select(Application).where(Application.email == who.strip().lower())
        found = (await session.exec(query.order_by(col(Application.created_at).desc()))).first()
    if found is None:
        raise NotFound(f"No application has the id or email {who!r}.")
    return found


async def list_applications(session: AsyncSession, status: str | None = None) -> list[Application]:
    return await applications.list_applications(session, ApplicationStatus(status) if status else None)


async def approve(session: AsyncSession, who: str, now: datetime, base_url: str, *, grant: str | None = None,
                  decided_by: str = "") -> tuple[Application, User]:
    tokens = arguments.tokens(grant, least=1) if grant else None
    application = await find_application(session, who)
    user = await applications.approve(session, application, now, base_url, grant=tokens, decided_by=decided_by)
    return application, user


async def reject(session: AsyncSession, who: str, now: datetime, base_url: str, *, note: str = "",
                 decided_by: str = "") -> Application:
    note = arguments.short_text(note, "A rejection's note", 2000)
    application = await find_application(session, who)
    return await applications.reject(session, application, now, base_url, note=note, decided_by=decided_by)


@dataclass(frozen=True)
class InviteLink:
    invite_id: uuid.UUID
    email: str
    link: str
    expires_at: datetime
    tokens: int | None
    tag: str | None


async def create_invite(session: AsyncSession, email: str, now: datetime, base_url: str, *,
                        tokens: str | None = None, tag: str | None = None, created_by: str = "") -> InviteLink:
    """An invite link for the email: its form approves the User at once. Commits."""
    email = applications.email_address(email)
    granted = arguments.tokens(tokens, least=1) if tokens else None
    tag = arguments.tag(tag) if tag else None
    try:
        await applications.refuse_taken(session, email)
    except ApplicationExists:
        raise LedgerError(EMAIL_TAKEN.format(email=email)) from None
    invite, token = await access_links.make_invite(session, email, now, tokens=granted, tag=tag, created_by=created_by)
    await session.commit()
    return InviteLink(invite.id, email, access_mail.invite_link(base_url, token), invite.expires_at, granted, tag)


async def send_password_link(session: AsyncSession, email: str, now: datetime, base_url: str) -> LinkPurpose:
    """Mails the User a set link (no password yet) or a reset link; tells the operator why not."""
    email = applications.email_address(email)
    user = await applications.user_by_email(session, email)
    if user is None:
        raise NotFound(f"No User has the email {email}.")
    if user.standing == Standing.suspended:
        raise LedgerError(f"The access of {email} is suspended: a suspended User gets no password link.")
    purpose = LinkPurpose.reset if user.password_hash else LinkPurpose.set
    await sign_in.ask_password_link(session, email, now, base_url)
    return purpose


def application_document(application: Application) -> dict[str, Any]:
    """An Application as `--json` prints it (and the admin routes will answer it)."""
    return {"id": str(application.id), "email": application.email, "name": application.name,
            "organization": application.organization, "planned_usage": application.planned_usage,
            "how_you_heard": application.how_you_heard, "links": application.links,
            "expected_tokens": application.expected_tokens, "status": application.status.value,
            "note": application.note, "user_id": str(application.user_id) if application.user_id else None,
            "created_at": iso(application.created_at), "decided_at": iso(application.decided_at),
            "decided_by": application.decided_by}
