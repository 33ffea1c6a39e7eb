"""A User's own API keys, as the App's API Keys page lists, makes and changes them (spec: "Manage your
keys"). A key is shown whole only in the answer that made it; the ledger keeps its hash.

Each change checks first that the key is the User's: another User's key is not found, whatever it is.
"""
from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from domain.operations.api_keys import STATUS_OF_ACTION
from domain.operations.documents import iso
from domain.services import Services
from ledger.accounts import keys
from ledger.accounts.keys import MAX_LIVE_KEYS
from ledger.accounts.tables import ApiKey
from ledger.errors import OwnKeyNotFound
from ledger.tokens import usage


def key_document(line: usage.KeyLine) -> dict[str, Any]:
    key = line.key
    return {"id": str(key.id), "name": key.name, "prefix": key.prefix, "status": key.status.value,
            "tokens_this_month": line.tokens_this_month, "budget_left": line.budget_left,
            "last_used_at": iso(key.last_used_at), "created_at": iso(key.created_at)}


async def list_keys(services: Services, user_id: uuid.UUID) -> dict[str, Any]:
    """The keys that the User can use, and the room for more."""
    async with services.sessions() as session:
        lines = await key_lines(session, user_id, services.clock())
    return {"data": [key_document(line) for line in lines], "max_keys": MAX_LIVE_KEYS,
            "has_more_room": len(lines) < MAX_LIVE_KEYS}


async def create_key(services: Services, user_id: uuid.UUID, name: str) -> dict[str, Any]:
    async with services.ledger.write_sessions() as session:
        line, raw_key = await make_key(session, user_id, name, services.clock())
    return {**key_document(line), "key": raw_key}


async def rename_key(services: Services, user_id: uuid.UUID, key_id: uuid.UUID, name: str) -> dict[str, Any]:
    async with services.ledger.write_sessions() as session:
        return key_document(await rename(session, user_id, key_id, name, services.clock()))


async def change_key(services: Services, user_id: uuid.UUID, key_id: uuid.UUID, action: str) -> dict[str, Any]:
    async with services.ledger.write_sessions() as session:
        return key_document(await change_status(session, user_id, key_id, action, services.clock()))


# In one transaction of the caller's ------------------------------------------------------------------
async def own_key(session: AsyncSession, user_id: uuid.UUID, key_id: uuid.UUID) -> ApiKey:
    key = await session.get(ApiKey, key_id)
    if key is None or key.user_id != user_id:
        raise OwnKeyNotFound(f"You have no API key with the id {key_id}.")
    return key


async def key_lines(session: AsyncSession, user_id: uuid.UUID, now: datetime) -> list[usage.KeyLine]:
    """The keys that the User can use (active and paused), newest first."""
    lines = await usage.key_lines(session, user_id, now=now)
    return sorted(lines, key=lambda line: line.key.created_at, reverse=True)


async def key_line(session: AsyncSession, user_id: uuid.UUID, key_id: uuid.UUID, now: datetime) -> usage.KeyLine:
    """One key's line, a revoked key's too (the answer of a revoke)."""
    lines = await usage.key_lines(session, user_id, include_revoked=True, now=now)
    return next(line for line in lines if line.key.id == key_id)


async def make_key(session: AsyncSession, user_id: uuid.UUID, name: str,
                   now: datetime) -> tuple[usage.KeyLine, str]:
    """A new key; the whole key is returned this once, the ledger keeps its hash."""
    key, raw_key = await keys.create_api_key(session, user_id, name)
    key_id = key.id
    await session.commit()
    return await key_line(session, user_id, key_id, now), raw_key


async def rename(session: AsyncSession, user_id: uuid.UUID, key_id: uuid.UUID, name: str,
                 now: datetime) -> usage.KeyLine:
    await own_key(session, user_id, key_id)
    await keys.rename_key(session, key_id, name)
    await session.commit()
    return await key_line(session, user_id, key_id, now)


async def change_status(session: AsyncSession, user_id: uuid.UUID, key_id: uuid.UUID, action: str,
                        now: datetime) -> usage.KeyLine:
    """`pause`, `resume` or `revoke`; a revoked key stays revoked (a second revoke changes nothing)."""
    await own_key(session, user_id, key_id)
    await keys.set_key_status(session, key_id, STATUS_OF_ACTION[action])
    await session.commit()
    return await key_line(session, user_id, key_id, now)
