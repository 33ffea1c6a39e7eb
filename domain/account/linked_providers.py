"""The sign-in providers linked to a User, as /account/me lists them (its `providers`)."""
from __future__ import annotations

import uuid

from domain.account.provider_presets import offered
from domain.services import Services
from ledger.accounts import identities


async def linked(services: Services, user_id: uuid.UUID) -> list[dict]:
    """Each linked provider, oldest first; `offered`: whether the App still offers it (a self-hoster may have
    taken its settings away: it then signs no one in, and Profile still lets the User unlink it)."""
    names = {provider.id: provider.name for provider in offered(services.settings)}
    async with services.sessions() as session:
        rows = await identities.of_user(session, user_id)
    return [{"id": row.provider, "name": names.get(row.provider, row.provider), "email": row.email,
             "linked_at": row.linked_at.isoformat(), "offered": row.provider in names} for row in rows]
