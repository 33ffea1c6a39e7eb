"""An admin's view of a User's API keys: list, make, pause, resume, revoke."""
from __future__ import annotations

import uuid
from typing import Any

from domain.operations import api_keys, documents
from domain.services import Services


async def list_keys(services: Services, who: uuid.UUID, every: bool) -> dict[str, Any]:
    """The User's keys; `every` lists the revoked ones too."""
    async with services.sessions() as session:
        user, lines = await api_keys.key_lines(session, services.clock(), who, include_revoked=every)
    return documents.key_lines(user, lines)


async def create_key(services: Services, who: uuid.UUID, name: str) -> dict[str, Any]:
    """A new key for the User; the whole key is in this answer only (`key`)."""
    async with services.ledger.write_sessions() as session:
        user, key, raw_key = await api_keys.create_key(session, who, name)
    return {"user": documents.user_brief(user), "id": str(key.id), "name": key.name, "prefix": key.prefix,
            "key": raw_key}


async def change_key(services: Services, who: uuid.UUID, key_id: uuid.UUID, action: str) -> dict[str, Any]:
    """`pause`, `resume` or `revoke` the User's key; the answer is the key's page."""
    async with services.ledger.write_sessions() as session:
        await api_keys.set_key_status(session, key_id, action, who=who)
        return documents.key_page(await api_keys.key_page(session, services.clock(), key_id))
