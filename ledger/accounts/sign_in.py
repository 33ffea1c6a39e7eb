"""Signing in to the App, asking for a password link, and setting a password with one.

The tries of each are counted first (ledger/accounts/access_tries.py). Asking for a link answers the same for
every address, so it never tells whether a User has one; a suspended User gets no link.
"""
from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.accounts import access_links
from ledger.accounts import access_mail
from ledger.accounts import app_sessions
from ledger.accounts import passwords
from ledger.accounts.tables import LinkPurpose
from ledger.accounts.applications import email_address, user_by_email
from ledger.errors import EmailRefused, SignInFailed, SignInSuspended
from ledger.accounts.keys import ACCOUNT_SUSPENDED
from ledger.accounts.mail import queue_mail
from ledger.accounts.tables import Standing, User

WRONG = "The email or password is not right."
SET, CHANGED = "Your password is set.", "Your password is changed."


@dataclass(frozen=True)
class SignedIn:
    user: User
    session_id: uuid.UUID
    token: str  # the session cookie's value
    expires_at: datetime


async def user_of_password(session: AsyncSession, email: str, password: str) -> User:
    """The User with this email and password; only reads, so the hash's check holds no write lock.
    argon2 takes tens of milliseconds of CPU: it runs in a thread, off the event loop."""
    try:
        user = await user_by_email(session, email_address(email))
    except EmailRefused:
        user = None
    if not await asyncio.to_thread(passwords.verify, user.password_hash if user else None, password) or user is None:
        raise SignInFailed(WRONG)
    if user.standing == Standing.suspended:
        raise SignInSuspended(ACCOUNT_SUSPENDED)
    return user


async def start_session(session: AsyncSession, user: User, now: datetime) -> SignedIn:
    row, token = await app_sessions.start(session, user.id, now)
    await session.commit()
    return SignedIn(user, row.id, token, row.expires_at)


async def ask_password_link(session: AsyncSession, email: str, now: datetime, base_url: str) -> bool:
    """Mails a reset link to a User with a password, a set link to one without; nothing for an unknown
    or suspended address. Returns whether a mail was queued (the answer to the browser is the same). Commits."""
    try:
        user = await user_by_email(session, email_address(email))
    except EmailRefused:
        return False
    if user is None or user.standing == Standing.suspended or not user.email:
        return False
    purpose = LinkPurpose.reset if user.password_hash else LinkPurpose.set
    token = await access_links.make_password_link(session, user.id, purpose, now)
    words = access_mail.reset_password if purpose == LinkPurpose.reset else access_mail.set_password
    queue_mail(session, user.email, *words(base_url, token), now)
    await session.commit()
    return True


async def set_password(session: AsyncSession, token: str, password: str, now: datetime) -> str:
    """The password of the link's User; the link is used and every session of the User ends.
    Returns the page's words. Commits."""
    # A short password leaves the link unused. argon2 runs in a thread, off the event loop.
    password_hash = await asyncio.to_thread(passwords.hash_password, password)
    live = await access_links.live_password_link(session, token, now)
    await access_links.use_password_link(session, live.link, now)
    live.user.password_hash, live.user.password_set_at = password_hash, now
    session.add(live.user)
    await app_sessions.end_all(session, live.user.id, now)
    await session.commit()
    return CHANGED if live.link.purpose == LinkPurpose.reset else SET
