"""A User's own API keys, as the App's API Keys page makes and changes them (spec: "Manage your keys").

Each change checks first that the key is the User's: another User's key is not found, whatever it is.
"""
from __future__ import annotations

import uuid
from datetime import datetime

from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.accounts import keys
from ledger.tokens import usage
from ledger.errors import OwnKeyNotFound
from ledger.accounts.tables import ApiKey
from domain.operations.api_keys import STATUS_OF_ACTION


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
