"""The App's mail: a transactional outbox, and the two ways to send it.

`queue_mail` writes the mail in the transaction that made its link, so that a link and its mail are
both kept or both lost. After the commit the writer calls `deliver_pending`; the Runner's housekeeping
calls it too, for mail that the SMTP server refused or that a crash left unsent. A sender claims a row
for a while before it sends, so two processes never send one mail at once.

A body holds a live link's token, which the ledger keeps nowhere else but as a hash: once the mail is
sent (or given up), its body is dropped and the row keeps its recipient, subject and times. A row goes
after the retry window, the longest life of a link that a mail carries: no later try could help.

    SmtpMailer("smtp+starttls://user:pass@mail.example.org:587", "ACS Infra <infra@example.org>")
    OutboxFolderMailer(Path("var/outbox"))   # no SMTP server: each mail is an .eml file
"""
from __future__ import annotations

import asyncio
import logging
import smtplib
import ssl
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.message import EmailMessage
from email.utils import make_msgid
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from sqlalchemy import delete, or_, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.accounts.access_links import LINK_LIFETIME
from ledger.accounts.tables import MailOutbox
from ledger.store.coltypes import utcnow

log = logging.getLogger("acs.mail")
DEFAULT_FROM = "ACS Infra <infra@localhost>"
CLAIM_FOR = timedelta(minutes=2)
MAX_TRIES = 20  # past this a mail stays in the outbox, without its body, for an operator to read
RETRY_WINDOW = max(LINK_LIFETIME.values())  # the approval link's 7 days
DROPPED = ""  # the body of a mail that went out or was given up
SMTP_TIMEOUT_S = 30.0


class Mailer(Protocol):
    async def send(self, message: EmailMessage) -> None: ...


def queue_mail(session: AsyncSession, to: str, subject: str, body: str, now: datetime) -> MailOutbox:
    row = MailOutbox(to_address=to, subject=subject, body=body, created_at=now)
    session.add(row)
    return row


def message_of(row: MailOutbox, mail_from: str) -> EmailMessage:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = mail_from, row.to_address, row.subject
    message["Message-ID"] = make_msgid(idstring=row.id.hex, domain=_domain(mail_from))
    message.set_content(row.body)
    return message


def _domain(address: str) -> str:
    return address.rsplit("@", 1)[-1].strip(" >") or "localhost"


async def deliver_pending(sessions: Any, mailer: Mailer | None, now: datetime | None = None) -> int:
    """Send every unsent mail that no other sender holds; returns how many went out. First drops the
    rows past the retry window."""
    now = now or utcnow()
    await purge_old(sessions, now)
    if mailer is None:
        return 0
    async with sessions() as session:
        pending = list(await session.exec(select(MailOutbox.id).where(
            col(MailOutbox.sent_at).is_(None), MailOutbox.tries < MAX_TRIES,
            or_(col(MailOutbox.claimed_until).is_(None), col(MailOutbox.claimed_until) <= now))
            .order_by(col(MailOutbox.created_at))))
    sent = 0
    for mail_id in pending:
        sent += await _deliver_one(sessions, mailer, mail_id, now)
    return sent


async def _deliver_one(sessions: Any, mailer: Mailer, mail_id: Any, now: datetime) -> int:
    row = await _claim(sessions, mail_id, now)
    if row is None:
        return 0  # another sender has it
    try:
        await mailer.send(message_of(row, getattr(mailer, "mail_from", DEFAULT_FROM)))
    except Exception as error:  # noqa: BLE001 - any failure of the server: try again later
        log.warning("mail %s to %s failed: %s", row.id, row.to_address, error)
        await _record(sessions, mail_id, sent_at=None, last_error=f"{type(error).__name__}: {error}",
                      drop_body=row.tries >= MAX_TRIES)  # the last try: nobody sends the body now
        return 0
    await _record(sessions, mail_id, sent_at=now, last_error=None, drop_body=True)  # the sender's clock
    return 1


async def purge_old(sessions: Any, now: datetime) -> int:
    """Drop the mails older than the retry window, sent or not: their links no longer work."""
    async with sessions() as session:
        dropped = await session.execute(delete(MailOutbox).where(col(MailOutbox.created_at) <= now - RETRY_WINDOW))
        await session.commit()
        return dropped.rowcount or 0


async def _claim(sessions: Any, mail_id: Any, now: datetime) -> MailOutbox | None:
    async with sessions() as session:
        claimed = await session.execute(update(MailOutbox).where(
            MailOutbox.id == mail_id, col(MailOutbox.sent_at).is_(None),
            or_(col(MailOutbox.claimed_until).is_(None), col(MailOutbox.claimed_until) <= now))
            .values(claimed_until=now + CLAIM_FOR, tries=MailOutbox.tries + 1))
        await session.commit()
        if claimed.rowcount != 1:
            return None
        return await session.get(MailOutbox, mail_id)


async def _record(sessions: Any, mail_id: Any, *, sent_at: datetime | None, last_error: str | None,
                  drop_body: bool) -> None:
    values: dict[str, Any] = {"sent_at": sent_at, "last_error": last_error, "claimed_until": None}
    if drop_body:
        values["body"] = DROPPED  # the token of its link leaves the ledger with it
    async with sessions() as session:
        await session.execute(update(MailOutbox).where(MailOutbox.id == mail_id).values(**values))
        await session.commit()


@dataclass(frozen=True)
class SmtpMailer:
    """Sends over SMTP: `smtp://` (plain, for a relay on a private network or a test server),
    `smtp+starttls://` (STARTTLS, port 587) or `smtps://` (TLS from the start, port 465), each with an
    optional `user:password@`. smtplib blocks: each mail is sent in a thread."""

    url: str
    mail_from: str = DEFAULT_FROM

    async def send(self, message: EmailMessage) -> None:
        await asyncio.to_thread(self._send, message)

    def _send(self, message: EmailMessage) -> None:
        parts = urlsplit(self.url)
        scheme, host = parts.scheme.lower(), parts.hostname or "localhost"
        if scheme not in SMTP_PORTS:
            raise ValueError(f"ACS_SMTP_URL must start with smtp://, smtp+starttls:// or smtps://, not {scheme}://")
        port = parts.port or SMTP_PORTS[scheme]
        with _connect(scheme, host, port) as server:
            if scheme == "smtp+starttls":
                server.starttls(context=ssl.create_default_context())
            if parts.username:
                server.login(unquote(parts.username), unquote(parts.password or ""))
            server.send_message(message)


SMTP_PORTS = {"smtp": 25, "smtp+starttls": 587, "smtps": 465}


def _connect(scheme: str, host: str, port: int) -> smtplib.SMTP:
    """smtps speaks TLS from the first byte; smtp and smtp+starttls start in the clear."""
    if scheme == "smtps":
        return smtplib.SMTP_SSL(host, port, timeout=SMTP_TIMEOUT_S, context=ssl.create_default_context())
    return smtplib.SMTP(host, port, timeout=SMTP_TIMEOUT_S)


@dataclass(frozen=True)
class OutboxFolderMailer:
    """Without an SMTP server (a development machine): each mail becomes `<time>-<id>.eml` in a folder."""

    folder: Path
    mail_from: str = DEFAULT_FROM

    async def send(self, message: EmailMessage) -> None:
        await asyncio.to_thread(self._write, message)

    def _write(self, message: EmailMessage) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        stamp = utcnow().strftime("%Y%m%dT%H%M%S%fZ")
        name = message["Message-ID"].strip("<>").split("@")[0]
        (self.folder / f"{stamp}-{name}.eml").write_bytes(message.as_bytes())
