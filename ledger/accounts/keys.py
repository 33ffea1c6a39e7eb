"""Users, API keys, and the key check of every `/v1` request.

The functions that change rows flush but do not commit: the caller owns the
transaction. `authenticate` is the exception, see its docstring.
"""
from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy
from sqlalchemy import bindparam, case, func, or_, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.store import driver_sql
from ledger.store.coltypes import utcnow
from ledger.errors import (
    KeyRefused, NameRefused, NameTaken, NoKeyGiven, NotFound, PausedKey, RevokedKey, StatusChangeRefused,
    SuspendedAccount, TooManyKeys, UnknownKey,
)
from ledger.accounts.tables import KEY_NAME_MAX, KEY_PREFIX_LEN, ApiKey, KeyStatus, Standing, User
from ledger.tokens.tables import Hold, HoldState
from ledger.tokens.holds import month_of

KEY_PREFIX = "sk-acs-"
LEGACY_KEY_PREFIX = "acs-bm-"  # keys of the old platform, stored by hash like ours
KEY_RANDOM_BYTES = 36  # 48 url-safe characters
MAX_LIVE_KEYS = 10
# last_used_at is shown to the minute; writing it on every request would make
# each request wait on a write lock (all of SQLite's).
LAST_USED_RESOLUTION = timedelta(minutes=1)

# The spec's messages, docs.md "Fix a 401 error" (Use API keys).
MISSING_AUTHORIZATION = (
    "You didn't provide an API key. You need to provide your API key in an Authorization "
    "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
)
INVALID_API_KEY = "Incorrect API key provided."
KEY_REVOKED = "This API key has been revoked."
KEY_DISABLED = "This API key is paused. Resume it on API Keys in the App to use it again."
ACCOUNT_SUSPENDED = (
    "Your access to ACS Infra is suspended. "
    "Write to infra@acsresearch.org if you think this is a mistake."
)
# docs.md "Limits" → "API keys".
TOO_MANY_KEYS = (
    f"You have {MAX_LIVE_KEYS} API keys, the most that a User may have. "
    "Delete one to make another."
)


@dataclass(frozen=True)
class Principal:
    """Who a request acts for: the user and the key that authenticated it. `key_id` is None for
    the App's own work, a Playground Run, which uses no API key (spec: "Paused keys and
    suspended access")."""

    user_id: uuid.UUID
    key_id: uuid.UUID | None
    key_name: str


def hash_key(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode()).hexdigest()


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(KEY_RANDOM_BYTES)


# Users ----------------------------------------------------------------------
async def create_user(session: AsyncSession, name: str) -> User:
    name = name.strip()
    if not name:
        raise NameRefused("A user needs a name.")
    if await user_by_name(session, name) is not None:
        raise NameRefused(f"A user named {name!r} exists already.")
    user = User(name=name)
    session.add(user)
    await _flush_or_refuse(session, f"A user named {name!r} exists already.")
    return user


async def find_user(session: AsyncSession, name_or_id: str) -> User:
    """The user with this id, or else with this name."""
    user = None
    try:
        user = await session.get(User, uuid.UUID(name_or_id))
    except ValueError:
        pass  # not an id: try the name
    user = user or await user_by_name(session, name_or_id)
    if user is None:
        raise NotFound(f"No user has the name or id {name_or_id!r}.")
    return user


async def list_users(session: AsyncSession) -> list[User]:
    return list(await session.exec(select(User).order_by(col(User.created_at))))


async def set_standing(session: AsyncSession, user: User, standing: Standing) -> User:
    user.standing = standing
    session.add(user)
    await session.flush()
    return user


async def user_by_name(session: AsyncSession, name: str) -> User | None:
    return (await session.exec(select(User).where(User.name == name))).first()


# Keys -----------------------------------------------------------------------
async def create_api_key(session: AsyncSession, user_id: uuid.UUID, name: str) -> tuple[ApiKey, str]:
    """Make a key; the raw key is returned this once and never stored."""
    name = validate_key_name(name)
    # The row lock serializes key creation per user, so the limit holds.
    user = (await session.exec(select(User).where(User.id == user_id).with_for_update())).first()
    if user is None:
        raise NotFound(f"No user has the id {user_id}.")
    live = await list_keys(session, user_id)
    if len(live) >= MAX_LIVE_KEYS:
        raise TooManyKeys(TOO_MANY_KEYS)
    _refuse_taken_name(user, name, live)
    raw = generate_key()
    key = ApiKey(user_id=user_id, name=name, key_hash=hash_key(raw), prefix=raw[:KEY_PREFIX_LEN])
    session.add(key)
    await _flush_or_name_taken(session, user, name)
    return key, raw


def validate_key_name(name: str) -> str:
    name = name.strip()
    if not name:
        raise NameRefused("A key needs a name of 1 to 32 characters.")
    if len(name) > KEY_NAME_MAX:
        raise NameRefused(
            f"A key's name has at most {KEY_NAME_MAX} characters; this one has {len(name)}."
        )
    return name


async def list_keys(
    session: AsyncSession, user_id: uuid.UUID, *, include_revoked: bool = False
) -> list[ApiKey]:
    query = select(ApiKey).where(ApiKey.user_id == user_id)
    if not include_revoked:
        query = query.where(ApiKey.status != KeyStatus.revoked)
    return list(await session.exec(query.order_by(col(ApiKey.created_at))))


async def set_key_status(session: AsyncSession, key_id: uuid.UUID, status: KeyStatus) -> ApiKey:
    key = await session.get(ApiKey, key_id, with_for_update=True)
    if key is None:
        raise NotFound(f"No API key has the id {key_id}.")
    if key.status == KeyStatus.revoked and status != KeyStatus.revoked:
        raise StatusChangeRefused("A revoked key stays revoked: make a new key.")
    key.status = status
    session.add(key)
    await session.flush()
    return key


async def rename_key(session: AsyncSession, key_id: uuid.UUID, new_name: str) -> ApiKey:
    """Give a live key a new name, by the same rule as a new key's name."""
    new_name = validate_key_name(new_name)
    key = await session.get(ApiKey, key_id, with_for_update=True)
    if key is None:
        raise NotFound(f"No API key has the id {key_id}.")
    if key.status == KeyStatus.revoked:
        raise StatusChangeRefused("A revoked key cannot be renamed: its name is free for a new key.")
    # The user's row lock serializes renames with key creation, as there.
    user = (await session.exec(select(User).where(User.id == key.user_id).with_for_update())).one()
    others = [other for other in await list_keys(session, user.id) if other.id != key.id]
    _refuse_taken_name(user, new_name, others)
    key.name = new_name
    session.add(key)
    await _flush_or_name_taken(session, user, new_name)
    return key


async def tokens_this_month(
    session: AsyncSession, user_id: uuid.UUID, now: datetime | None = None
) -> dict[uuid.UUID | None, int]:
    """Tokens of each of the user's keys in this UTC month: settled Usage plus running Holds.

    Released Holds cost nothing. The key None gathers Holds taken without a key.
    """
    spent = case(
        (col(Hold.state) == HoldState.settled, col(Hold.used)),
        (col(Hold.state) == HoldState.held, col(Hold.tokens)),
        else_=0,
    )
    query = (
        select(Hold.key_id, func.sum(spent))
        .where(Hold.user_id == user_id, Hold.month == month_of(now or utcnow()))
        .group_by(col(Hold.key_id))
    )
    return {key_id: int(total or 0) for key_id, total in await session.exec(query)}


def _refuse_taken_name(user: User, name: str, live_keys: list[ApiKey]) -> None:
    # The spec: no two live keys share a name, whatever the case of its letters.
    for key in live_keys:
        if key.name.casefold() == name.casefold():
            raise NameTaken(_name_taken_message(user, key.name), key.name)


def _name_taken_message(user: User, name: str) -> str:
    return f"{user.name!r} has a live key named {name!r} already; names ignore case."


async def _flush_or_refuse(session: AsyncSession, message: str) -> None:
    # A unique index catches what a concurrent request slipped past our check.
    try:
        await session.flush()
    except IntegrityError as error:
        raise NameRefused(message) from error


async def _flush_or_name_taken(session: AsyncSession, user: User, name: str) -> None:
    # As _flush_or_refuse, for a key's name: the App tells a taken name apart (409).
    message = _name_taken_message(user, name)  # before the flush: a failed one expires `user`
    try:
        await session.flush()
    except IntegrityError as error:
        raise NameTaken(message, name) from error


# The key check --------------------------------------------------------------
async def authenticate(session: AsyncSession, authorization: str | None) -> Principal:
    """Check an `Authorization` header; raise the spec's 401 or return who it is.

    Call it first on its session: it ends the session's transaction, so no
    snapshot or lock outlives the check while a long request runs.
    """
    row = (await session.execute(_KEY_BY_HASH, {"key_hash": _key_hash_of(authorization)})).first()
    try:
        principal, last_used_at = _checked(row)
    except KeyRefused:
        await session.rollback()
        raise
    await _touch(session, principal.key_id, last_used_at)
    return principal


# Built once: making the statement anew took about as much CPU as running it, on every request.
# The columns a Principal and the refusals need, no ORM row: both ways in read them alike.
# SQLAlchemy's select: SQLModel's is typed for at most 4 columns.
_KEY_BY_HASH = (
    sqlalchemy.select(col(ApiKey.id), col(ApiKey.user_id), col(ApiKey.name), col(ApiKey.status),
                      col(ApiKey.last_used_at), col(User.standing))
    .join(User).where(col(ApiKey.key_hash) == bindparam("key_hash"))
)


async def authenticate_on(engine: AsyncEngine, sessions: Any, authorization: str | None) -> Principal:
    """authenticate, on a connection of `engine`'s pool driven by its own driver (ledger/store/driver_sql.py):
    the key's row in one read and no session, the API's path for every request. Only a stale
    last_used_at takes a session of `sessions`, to write it (once a minute a key at most)."""
    rows = await driver_sql.read(engine, _KEY_BY_HASH, {"key_hash": _key_hash_of(authorization)})
    principal, last_used_at = _checked(rows[0] if rows else None)
    if _stale(last_used_at):
        async with sessions() as session:
            await _touch(session, principal.key_id, last_used_at)
    return principal


def _checked(row: Any) -> tuple[Principal, datetime | None]:
    """The key's Principal and last use from its row, or the refusal it earns (None: no such key)."""
    if row is None:
        raise UnknownKey(INVALID_API_KEY)
    key_id, user_id, name, status, last_used_at, standing = row
    _refuse_unusable(KeyStatus(status), Standing(standing))
    return Principal(user_id=user_id, key_id=key_id, key_name=name), last_used_at


async def recheck(session: AsyncSession, principal: Principal) -> None:
    """Raise the 401 a key earns now: for work that outlived its request's check."""
    query = select(col(ApiKey.status), col(User.standing)).join(User).where(col(ApiKey.id) == principal.key_id)
    row = (await session.exec(query)).first()
    if row is None:
        raise UnknownKey(INVALID_API_KEY)
    _refuse_unusable(*row)


def _key_hash_of(authorization: str | None) -> str:
    raw_key = _bearer_token(authorization)
    if not raw_key.startswith((KEY_PREFIX, LEGACY_KEY_PREFIX)):
        raise UnknownKey(INVALID_API_KEY)
    return hash_key(raw_key)


def _bearer_token(authorization: str | None) -> str:
    scheme, _, token = (authorization or "").strip().partition(" ")
    token = token.strip()
    # The auth scheme is case-insensitive (RFC 9110); the key is not.
    if scheme.lower() != "bearer" or not token:
        raise NoKeyGiven(MISSING_AUTHORIZATION)
    return token


def _refuse_unusable(status: KeyStatus, standing: Standing) -> None:
    # A revoked key is dead whatever its user's standing. A suspension covers
    # every live key, paused ones too: resuming one would not help.
    if status == KeyStatus.revoked:
        raise RevokedKey(KEY_REVOKED)
    if standing == Standing.suspended:
        raise SuspendedAccount(ACCOUNT_SUSPENDED)
    if status == KeyStatus.paused:
        raise PausedKey(KEY_DISABLED)


def _stale(last_used_at: datetime | None, now: datetime | None = None) -> bool:
    return last_used_at is None or (now or utcnow()) - last_used_at >= LAST_USED_RESOLUTION


async def _touch(session: AsyncSession, key_id: uuid.UUID | None, last_used_at: datetime | None) -> None:
    """Record the use when last_used_at is stale, then end the transaction. A Principal without a
    key (the App's own work) has no use to record."""
    now = utcnow()
    if key_id is None or not _stale(last_used_at, now):
        await session.rollback()
        return
    # The WHERE makes concurrent first uses write once, not once each.
    last_used = col(ApiKey.last_used_at)
    stale = or_(last_used.is_(None), last_used < now - LAST_USED_RESOLUTION)
    statement = (
        update(ApiKey)
        .where(col(ApiKey.id) == key_id, stale)
        .values(last_used_at=now)
        .execution_options(synchronize_session=False)
    )
    try:
        await session.exec(statement)
        await session.commit()
    except OperationalError:
        # A busy database must not fail a request over a display field.
        await session.rollback()
