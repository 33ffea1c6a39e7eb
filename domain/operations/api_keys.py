"""A User's API keys, as an admin sees and changes them. A key is never shown back, only its prefix."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.accounts import keys
from ledger.tokens import usage
from ledger.errors import LedgerError, NotFound, StatusChangeRefused
from ledger.accounts.tables import ApiKey, KeyStatus, User
from domain.operations.users import find_user

STATUS_OF_ACTION = {"pause": KeyStatus.paused, "resume": KeyStatus.active, "revoke": KeyStatus.revoked}


@dataclass(frozen=True)
class KeyOwner:
    user_id: uuid.UUID
    name: str
    standing: str


@dataclass(frozen=True)
class KeyPage:
    line: usage.KeyLine
    owner: KeyOwner


async def key_of(session: AsyncSession, user: User, key_id: uuid.UUID) -> ApiKey:
    key = await session.get(ApiKey, key_id)
    if key is None or key.user_id != user.id:
        raise NotFound(f"{user.name!r} has no API key with the id {key_id}.")
    return key


async def live_key_of(session: AsyncSession, user: User, key_id: uuid.UUID) -> ApiKey:
    """A key that can still spend: a Grant or a Budget for a revoked key would be lost."""
    key = await key_of(session, user, key_id)
    if key.status == KeyStatus.revoked:
        raise StatusChangeRefused(f"The key {key.name!r} is revoked: it can spend nothing.")
    return key


async def key_by_id_or_raw(session: AsyncSession, text: str | uuid.UUID) -> ApiKey:
    """A key by its id, or by a whole key hashed as the key check hashes it."""
    if isinstance(text, uuid.UUID):
        return await _key_by_id(session, text)
    text = text.strip()
    if text.startswith((keys.KEY_PREFIX, keys.LEGACY_KEY_PREFIX)):
        key = (await session.exec(select(ApiKey).where(ApiKey.key_hash == keys.hash_key(text)))).first()
        if key is None:  # the text may be a real secret: it is not repeated
            raise NotFound("No API key matches the key given.")
        return key
    try:
        key_id = uuid.UUID(text)
    except ValueError:  # perhaps a key cut short: not repeated either
        raise LedgerError("Give a key id (a UUID: `key list --user ...` shows them) or a whole key "
                          f"({keys.KEY_PREFIX}... or {keys.LEGACY_KEY_PREFIX}...).") from None
    return await _key_by_id(session, key_id)


async def _key_by_id(session: AsyncSession, key_id: uuid.UUID) -> ApiKey:
    key = await session.get(ApiKey, key_id)
    if key is None:
        raise NotFound(f"No API key has the id {key_id}.")
    return key


async def create_key(session: AsyncSession, who: str | uuid.UUID, name: str) -> tuple[User, ApiKey, str]:
    """Make a key; the whole key is returned this once and never stored."""
    user = await find_user(session, who)
    key, raw_key = await keys.create_api_key(session, user.id, name)
    await session.commit()
    return user, key, raw_key


async def key_lines(session: AsyncSession, now: datetime, who: str | uuid.UUID, *,
                    include_revoked: bool = False) -> tuple[User, list[usage.KeyLine]]:
    user = await find_user(session, who)
    return user, await usage.key_lines(session, user.id, include_revoked=include_revoked, now=now)


async def key_page(session: AsyncSession, now: datetime, text: str | uuid.UUID) -> KeyPage:
    """One key and its User, found by its id or by the whole key."""
    key = await key_by_id_or_raw(session, text)
    user = await session.get(User, key.user_id)
    assert user is not None, f"the key {key.id} has no User"  # a foreign key: every key has its User
    owner = KeyOwner(user.id, user.name, user.standing.value)
    lines = await usage.key_lines(session, key.user_id, include_revoked=True, now=now)
    return KeyPage(next(line for line in lines if line.key.id == key.id), owner)


async def rename_key(session: AsyncSession, key_id: uuid.UUID, name: str) -> ApiKey:
    key = await keys.rename_key(session, key_id, name)
    await session.commit()
    return key


async def set_key_status(session: AsyncSession, key_id: uuid.UUID, action: str, *,
                         who: str | uuid.UUID | None = None) -> ApiKey:
    """`pause`, `resume` or `revoke` a key (of the User `who`, when given); a revoked key stays revoked."""
    if who is not None:
        await key_of(session, await find_user(session, who), key_id)
    key = await keys.set_key_status(session, key_id, STATUS_OF_ACTION[action])
    await session.commit()
    return key
