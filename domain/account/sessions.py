"""The App's sessions: the one that a cookie names, its renewal when it is used, its end.

A session is renewed at most once a day, when it is used; the api then sends its cookie again.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from domain import errors
from domain.services import Services
from ledger.accounts import app_sessions
from ledger.accounts.tables import Role


@dataclass(frozen=True)
class AccountUser:
    """The signed-in User of an /account route, and its session."""

    user_id: uuid.UUID
    email: str
    name: str
    role: Role
    session_id: uuid.UUID
    # This use of the session is the one that renews it: its cookie goes out again.
    renewal_due: bool = False

    @property
    def is_admin(self) -> bool:
        return self.role == Role.admin


async def live_session(services: Services, token: str | None) -> AccountUser:
    """The User of the session that `token` names, or 401 session_ended."""
    found = None
    if token:
        async with services.sessions() as session:
            found = await app_sessions.find(session, token, services.clock())
    if found is None:
        raise errors.SessionEnded(errors.SESSION_ENDED_MESSAGE)
    user = found.user
    return AccountUser(user.id, user.email or "", user.name, user.role, found.session_id, found.renewal_due)


async def renew(services: Services, session_id: uuid.UUID, now: datetime) -> datetime:
    """30 more days from `now`: the session's new end."""
    async with services.ledger.write_sessions() as session:
        expires_at = await app_sessions.renew(session, session_id, now)
        await session.commit()
    return expires_at


async def end(services: Services, token: str | None) -> None:
    """Ends the session that `token` names, when there is one: sign-out never fails."""
    try:
        found = await live_session(services, token)
    except errors.SessionEnded:
        return
    async with services.ledger.write_sessions() as session:
        await app_sessions.end(session, found.session_id, services.clock())
        await session.commit()
