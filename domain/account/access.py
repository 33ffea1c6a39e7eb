"""The App's ways in: Apply, Invites, password links and setting a password, each counted against the
client's address (and the email it names) before it runs.

The logic is the ledger's (applications, access_links, sign_in); each use case opens its transaction.
`answers` are the form's texts as the api read them (`ledger.accounts.applications.ApplicationForm`).
"""
from __future__ import annotations

import logging

from domain.mail import mail_base_url, team_mail_of
from domain.services import Services
from ledger.accounts import access_links, sign_in
from ledger.accounts.access_tries import Family, count_try
from ledger.accounts.applications import ApplicationForm, accept_invite, submit
from ledger.accounts.mail import deliver_pending

log = logging.getLogger("acs.account")


async def count(services: Services, family: Family, address: str, account: str | None = None) -> None:
    """Count this try from the client's address, and against the account (an email) it names."""
    async with services.ledger.write_sessions() as session:
        await count_try(session, family, address, services.clock(), account=account)


async def apply(services: Services, email: str, answers: dict[str, str], address: str) -> dict:
    await count(services, Family.applications, address, email)
    async with services.ledger.write_sessions() as session:
        await submit(session, email, ApplicationForm(**answers), services.clock(), team=team_mail_of(services.settings))
    return {"status": "received"}


async def read_invite(services: Services, token: str) -> dict:
    async with services.sessions() as session:
        invite = await access_links.live_invite(session, token, services.clock())
    return {"email": invite.email}


async def use_invite(services: Services, token: str, answers: dict[str, str]) -> dict:
    """The Invite's User, made; its answer's token sets the first password."""
    async with services.ledger.write_sessions() as session:
        password_token = await accept_invite(session, token, ApplicationForm(**answers), services.clock())
    return {"password_token": password_token}


async def ask_password_link(services: Services, email: str, address: str) -> bool:
    """Whether a mail was written (to send after the answer); the browser is told the same either way."""
    await count(services, Family.links, address, email)
    async with services.ledger.write_sessions() as session:
        return await sign_in.ask_password_link(session, email, services.clock(), mail_base_url(services.settings))


async def send_mail(services: Services) -> None:
    """After the answer: the mail that the request's transaction wrote (the Runner retries what fails)."""
    try:
        await deliver_pending(services.ledger.write_sessions, services.mailer, services.clock())
    except Exception:  # noqa: BLE001 - the mail stays in the outbox for the Runner
        log.exception("sending the App's mail failed")


async def read_password_link(services: Services, token: str) -> dict:
    async with services.sessions() as session:
        live = await access_links.live_password_link(session, token, services.clock())
    return {"purpose": live.link.purpose.value, "email": live.user.email}


async def set_password(services: Services, token: str, password: str, address: str) -> dict:
    await count(services, Family.password, address)
    async with services.ledger.write_sessions() as session:
        message = await sign_in.set_password(session, token, password, services.clock())
    return {"message": message}
