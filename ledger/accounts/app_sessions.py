"""Sessions of the App: a random token in the browser's cookie, its sha256 here.

A session lasts 30 days from its last renewal, and is renewed at most once a day while it is used (the
spec's Limits). Sign-out, a new password and a suspension end it. The functions flush but do not commit.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.accounts.access_links import hash_token, new_token
from ledger.accounts.tables import AppSession
from ledger.accounts.tables import Standing, User

LIFETIME = timedelta(days=30)
RENEW_AFTER = timedelta(days=1)


@dataclass(frozen=True)
class LiveSession:
    """A session that works now, and its User. `renewal_due`: a day has passed since its last renewal."""

    session_id: uuid.UUID
    user: User
    expires_at: datetime
    renewal_due: bool


async def start(session: AsyncSession, user_id: uuid.UUID, now: datetime) -> tuple[AppSession, str]:
    """A new session; returns it and its token (for the cookie, never stored)."""
    token, token_hash = new_token()
    row = AppSession(user_id=user_id, token_hash=token_hash, created_at=now, renewed_at=now,
                     expires_at=now + LIFETIME)
    session.add(row)
    await session.flush()
    return row, token


async def find(session: AsyncSession, token: str, now: datetime) -> LiveSession | None:
    """The session of the token when it works, else None. Only reads: `renew` is the write."""
    found = (await session.exec(select(AppSession, User).join(User, col(User.id) == AppSession.user_id)
                                .where(AppSession.token_hash == hash_token(token)))).first()
    if found is None:
        return None
    row, user = found
    if row.ended_at is not None or row.expires_at <= now or user.standing == Standing.suspended:
        return None
    return LiveSession(row.id, user, row.expires_at, now - row.renewed_at >= RENEW_AFTER)


async def renew(session: AsyncSession, session_id: uuid.UUID, now: datetime) -> datetime:
    """30 more days from now, for a session that still works; returns its new end."""
    expires_at = now + LIFETIME
    await session.execute(update(AppSession).where(col(AppSession.id) == session_id,
                                                   col(AppSession.ended_at).is_(None))
                          .values(renewed_at=now, expires_at=expires_at))
    return expires_at


async def end(session: AsyncSession, session_id: uuid.UUID, now: datetime) -> None:
    await session.execute(update(AppSession).where(col(AppSession.id) == session_id,
                                                   col(AppSession.ended_at).is_(None))
                          .values(ended_at=now))


async def end_all(session: AsyncSession, user_id: uuid.UUID, now: datetime) -> int:
    """Ends every session of the User (a new password, a suspension); returns how many."""
    ended = await session.exec(update(AppSession).where(col(AppSession.user_id) == user_id,
                                                        col(AppSession.ended_at).is_(None))
                                  .values(ended_at=now))
    return ended.rowcount or 0
