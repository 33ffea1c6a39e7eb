"""An admin's Applications and Invites (spec: "Get access", "Use the App"): the list, one Application with
its answers, approve (the approval mail with its password link) or reject (the mail that links to the
Apply form), and Invites with a tag and tokens. The rules are `domain/operations/access.py`, which the
command line shares; the routes send the mails after the answer (`domain.account.access.send_mail`)."""
from __future__ import annotations

import uuid
from typing import Any

from domain.completions.validation import bad_value
from domain.mail import mail_base_url
from domain.operations import access
from domain.operations.documents import iso
from domain.services import Services
from ledger.accounts.tables import Application, ApplicationStatus
from ledger.errors import LedgerError

STATUSES = tuple(status.value for status in ApplicationStatus)


def status_of(value: str | None) -> str | None:
    """A `?status=` filter: waiting, approved or rejected (None: every Application)."""
    if value is not None and value not in STATUSES:
        raise bad_value("status", "waiting, approved or rejected")
    return value


def _waiting_first(found: list[Application]) -> list[Application]:
    """The waiting ones first, the longest waiting on top (an admin decides those first); then the decided
    ones, the newest decision first."""
    waiting = [each for each in found if each.status == ApplicationStatus.waiting]
    decided = [each for each in found if each.status != ApplicationStatus.waiting]
    decided.sort(key=lambda each: each.decided_at or each.created_at, reverse=True)
    return waiting + decided


async def list_applications(services: Services, status: str | None) -> dict[str, Any]:
    async with services.sessions() as session:
        found = await access.list_applications(session, status)
    return {"applications": [access.application_document(each) for each in _waiting_first(found)]}


async def show_application(services: Services, application_id: uuid.UUID) -> dict[str, Any]:
    async with services.sessions() as session:
        return access.application_document(await access.find_application(session, str(application_id)))


async def approve(services: Services, application_id: uuid.UUID, tokens: int | None, by: str) -> dict[str, Any]:
    """The User, made, with `tokens` in its Budget; the approval mail (7 days' password link) waits in the
    outbox for `send_mail`."""
    async with services.ledger.write_sessions() as session:
        application, user = await access.approve(session, str(application_id), services.clock(),
                                                 mail_base_url(services.settings),
                                                 grant=None if tokens is None else str(tokens), decided_by=by)
        return {**access.application_document(application), "user": {"id": str(user.id), "name": user.name}}


async def reject(services: Services, application_id: uuid.UUID, note: str, by: str) -> dict[str, Any]:
    """Rejected with `note`, which the mail (linking to the Apply form) quotes."""
    async with services.ledger.write_sessions() as session:
        application = await access.reject(session, str(application_id), services.clock(),
                                          mail_base_url(services.settings), note=note, decided_by=by)
        return access.application_document(application)


async def create_invite(services: Services, email: str, tag: str | None, tokens: int | None,
                        by: str) -> dict[str, Any]:
    """An invite link (once, for 7 days) whose form approves the User at once, with the tag and tokens. The
    answer holds the link: it is shown once, as the command line prints it, and no mail goes out."""
    try:
        async with services.ledger.write_sessions() as session:
            made = await access.create_invite(session, email, services.clock(), mail_base_url(services.settings),
                                              tokens=None if tokens is None else str(tokens), tag=tag,
                                              created_by=by)
    except LedgerError as refusal:
        # The tag's refusal names its field; the others that reach here are the email's (not an address,
        # or taken): the App shows them under Email.
        refusal.param = refusal.param or "email"
        raise
    return {"id": str(made.invite_id), "email": made.email, "link": made.link, "expires_at": iso(made.expires_at),
            "tokens": made.tokens, "tag": made.tag}
