"""The App's one-time links: password links (approval, set, reset) and Invites.

A link's token is random (`secrets.token_urlsafe(32)`) and only its sha256 is kept. Each works once;
only the newest password link of a User works (making one ends the older ones). The functions flush
but do not commit: the caller owns the transaction (the link's mail is written in it too).
"""
from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.accounts.tables import Invite, LinkPurpose, PasswordLink
from ledger.errors import LinkExpired
from ledger.accounts.tables import Standing, User

# The spec's Limits: the approval email's link works 7 days, a set or reset link 1 hour, an Invite 7 days.
LINK_LIFETIME = {LinkPurpose.approval: timedelta(days=7), LinkPurpose.set: timedelta(hours=1),
                 LinkPurpose.reset: timedelta(hours=1)}
INVITE_LIFETIME = timedelta(days=7)
# An Invite's set link gives the new User the approval's 7 days, as the page opens it at once.
INVITE_PASSWORD_LIFETIME = timedelta(days=7)
DID_NOT_WORK = "The link did not work"


def new_token() -> tuple[str, str]:
    """A random token and its sha256: the token goes in the link, the hash in the ledger."""
    token = secrets.token_urlsafe(32)
    return token, hash_token(token)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class LiveLink:
    """A password link that works now, with its User."""

    link: PasswordLink
    user: User


async def make_password_link(session: AsyncSession, user_id: uuid.UUID, purpose: LinkPurpose, now: datetime,
                             lifetime: timedelta | None = None) -> str:
    """A new link for the User; every older link of the User stops working. Returns its token."""
    await session.execute(update(PasswordLink).where(col(PasswordLink.user_id) == user_id,
                                                     col(PasswordLink.ended_at).is_(None)).values(ended_at=now))
    token, token_hash = new_token()
    session.add(PasswordLink(user_id=user_id, purpose=purpose, token_hash=token_hash, created_at=now,
                             expires_at=now + (lifetime or LINK_LIFETIME[purpose])))
    await session.flush()
    return token


async def live_password_link(session: AsyncSession, token: str, now: datetime) -> LiveLink:
    """The link of the token, when it works: not used, not ended by a newer one, not too old, and its
    User not suspended (the App sends a suspended User no password link, and takes none)."""
    found = (await session.exec(select(PasswordLink, User).join(User, col(User.id) == PasswordLink.user_id)
                                .where(PasswordLink.token_hash == hash_token(token)))).first()
    if found is None:
        raise LinkExpired(DID_NOT_WORK)
    link, user = found
    if link.ended_at is not None or link.expires_at <= now or user.standing == Standing.suspended:
        raise LinkExpired(DID_NOT_WORK)
    return LiveLink(link, user)


async def use_password_link(session: AsyncSession, link: PasswordLink, now: datetime) -> None:
    """Ends the link; of two requests with the same link at once, the second finds it used."""
    used = await session.exec(update(PasswordLink).where(col(PasswordLink.id) == link.id,
                                                         col(PasswordLink.ended_at).is_(None))
                                 .values(ended_at=now))
    if used.rowcount != 1:
        raise LinkExpired(DID_NOT_WORK)


async def make_invite(session: AsyncSession, email: str, now: datetime, *, tokens: int | None = None,
                      tag: str | None = None, created_by: str = "") -> tuple[Invite, str]:
    token, token_hash = new_token()
    invite = Invite(email=email, token_hash=token_hash, tokens=tokens, tag=tag, created_by=created_by,
                    created_at=now, expires_at=now + INVITE_LIFETIME)
    session.add(invite)
    await session.flush()
    return invite, token


async def live_invite(session: AsyncSession, token: str, now: datetime) -> Invite:
    invite = (await session.exec(select(Invite).where(Invite.token_hash == hash_token(token)))).first()
    if invite is None or invite.used_at is not None or invite.expires_at <= now:
        raise LinkExpired(DID_NOT_WORK)
    return invite


async def use_invite(session: AsyncSession, invite: Invite, now: datetime) -> None:
    used = await session.exec(update(Invite).where(col(Invite.id) == invite.id, col(Invite.used_at).is_(None))
                                 .values(used_at=now))
    if used.rowcount != 1:
        raise LinkExpired(DID_NOT_WORK)
