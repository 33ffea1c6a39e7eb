"""Signing in to the App with an email and a password, and who is signed in (`/account/me`)."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from domain.account.access import count
from domain.account.linked_providers import linked
from domain.services import Services
from domain.settings import Settings
from ledger.accounts import keys, sign_in
from ledger.accounts.access_tries import Family


@dataclass(frozen=True)
class SignIn:
    """A new session: its cookie's value and end, the time it started, and the answer's document."""

    token: str
    expires_at: datetime
    now: datetime
    document: dict[str, Any]


async def sign_in_with_password(services: Services, email: str, password: str, address: str) -> SignIn:
    await count(services, Family.sign_in, address, email)
    async with services.sessions() as session:
        user = await sign_in.user_of_password(session, email, password)
    async with services.ledger.write_sessions() as session:
        signed = await sign_in.start_session(session, user, services.clock())
    now = services.clock()
    user = signed.user
    found = await me(services, user.id, user.email or "", user.name, user.role.value)
    return SignIn(signed.token, signed.expires_at, now,
                  {"user": found, "next": "/playground" if found["has_key"] else "/api-keys"})


async def me(services: Services, user_id: uuid.UUID, email: str, name: str, role: str) -> dict:
    async with services.sessions() as session:
        has_key = bool(await keys.list_keys(session, user_id))
    # `providers`: the sign-in providers linked to the User (Profile's Sign-in methods).
    return {"id": str(user_id), "email": email, "name": name, "role": role, "has_key": has_key,
            "providers": await linked(services, user_id)} | support_links(services.settings)


def support_links(settings: Settings) -> dict[str, str]:
    """The Support menu's links that an install sets up: `discord_invite_url` when ACS_DISCORD_INVITE_URL is set
    (the App shows Discord only then); none otherwise, so the document is as before."""
    invite = (settings.discord_invite_url or "").strip()
    return {"discord_invite_url": invite} if invite else {}
