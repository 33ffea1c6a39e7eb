"""Users: find, make, list with their tags and engagement, show, and the admin's changes to one."""
from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy import delete
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.tokens import analytics
from ledger.accounts import app_sessions
from ledger.tokens import grants
from ledger.work import harvests
from ledger.accounts import keys
from ledger.tokens import usage
from ledger.store.coltypes import utcnow
from ledger.errors import LedgerError, NotFound
from ledger.accounts.tables import Role, Standing, User, UserTag
from domain.operations import arguments
from domain.operations.platform import Platform

# A route acts for an admin; these would lock that admin out of the routes they use.
OWN_ROLE = "You cannot change your own role: ask another admin."
OWN_STANDING = "You cannot suspend yourself: ask another admin."


@dataclass(frozen=True)
class UserLine:
    """One row of the Users tab."""

    user_id: uuid.UUID
    name: str
    role: Role
    standing: Standing
    monthly_allowance: int
    allowance_is_default: bool
    created_at: datetime
    tags: list[str]
    activity: analytics.Activity


@dataclass(frozen=True)
class UserPage:
    """A User's page: the account as `usage.account` counts it, and what the Users tab shows."""

    account: usage.Account
    role: Role
    created_at: datetime
    tags: list[str]
    activity: analytics.Activity


async def find_user(session: AsyncSession, who: str | uuid.UUID) -> User:
    """By id (the routes' path ids), or by a name or id as the command line takes them."""
    if not isinstance(who, uuid.UUID):
        return await keys.find_user(session, who)
    user = await session.get(User, who)
    if user is None:
        raise NotFound(f"No user has the id {who}.")
    return user


async def create_user(session: AsyncSession, name: str) -> User:
    user = await keys.create_user(session, name)
    await session.commit()
    return user


async def user_lines(session: AsyncSession, platform: Platform, tag: str | None = None) -> list[UserLine]:
    users = await keys.list_users(session)
    tags = await tags_of(session)
    active = await analytics.activity(session, platform.clock())
    if tag is not None:
        wanted = arguments.tag(tag)
        users = [user for user in users if wanted in tags[user.id]]
    return [_line(user, tags[user.id], active.get(user.id, analytics.NO_ACTIVITY), platform) for user in users]


def _line(user: User, tags: list[str], activity: analytics.Activity, platform: Platform) -> UserLine:
    own = user.monthly_allowance
    return UserLine(user.id, user.name, user.role, user.standing, platform.monthly_allowance if own is None else own,
                    own is None, user.created_at, tags, activity)


async def tags_of(session: AsyncSession, user_id: uuid.UUID | None = None) -> dict[uuid.UUID, list[str]]:
    query = select(UserTag).order_by(col(UserTag.tag))
    if user_id is not None:
        query = query.where(UserTag.user_id == user_id)
    found: dict[uuid.UUID, list[str]] = defaultdict(list)
    for row in await session.exec(query):
        found[row.user_id].append(row.tag)
    return found


async def user_page(session: AsyncSession, platform: Platform, who: str | uuid.UUID) -> UserPage:
    user = await find_user(session, who)
    user_id, role, created_at = user.id, user.role, user.created_at  # account() ends the transaction
    now = platform.clock()
    found = await usage.account(session, user, now=now)
    if found.allowance_is_default:  # usage.account knows only the built-in default
        found = replace(found, allowance=platform.monthly_allowance)
    tags = (await tags_of(session, user_id))[user_id]
    activity = (await analytics.activity(session, now)).get(user_id, analytics.NO_ACTIVITY)
    return UserPage(found, role, created_at, tags, activity)


async def set_standing(session: AsyncSession, who: str | uuid.UUID, standing: Standing, *,
                       acting: uuid.UUID | None = None) -> User:
    user = await find_user(session, who)
    if acting == user.id and standing == Standing.suspended:
        raise LedgerError(OWN_STANDING)
    user = await keys.set_standing(session, user, standing)
    if standing == Standing.suspended:
        await app_sessions.end_all(session, user.id, utcnow())  # the spec: a suspension ends the sessions
    await session.commit()
    return user


async def set_allowance(session: AsyncSession, platform: Platform, who: str | uuid.UUID,
                        tokens: int | None) -> tuple[User, int]:
    """None: back to the platform's default. Returns the User and the allowance that now applies."""
    user = await find_user(session, who)
    await grants.set_allowance(session, user.id, tokens)
    return user, platform.monthly_allowance if tokens is None else tokens


async def set_harvest_quota(session: AsyncSession, who: str | uuid.UUID, quota: int | None) -> tuple[User, int]:
    """The harvests that each key of the User may start in a UTC month; None: the spec's 200."""
    user = await find_user(session, who)
    await harvests.set_quota(session, user.id, quota)
    return user, harvests.DEFAULT_MONTHLY_QUOTA if quota is None else quota


async def set_role(session: AsyncSession, who: str | uuid.UUID, role: Role, *,
                   acting: uuid.UUID | None = None) -> User:
    user = await find_user(session, who)
    if acting == user.id and role != user.role:
        raise LedgerError(OWN_ROLE, param="role")
    user.role = role
    session.add(user)
    await session.commit()
    return user


async def add_tag(session: AsyncSession, who: str | uuid.UUID, tag: str) -> tuple[User, list[str]]:
    """Put a tag on a User (written in its one form); a tag that is there already stays once."""
    tag = arguments.tag(tag)
    user = await find_user(session, who)
    if await session.get(UserTag, (user.id, tag)) is None:
        session.add(UserTag(user_id=user.id, tag=tag))
        await session.commit()
    return user, (await tags_of(session, user.id))[user.id]


async def remove_tag(session: AsyncSession, who: str | uuid.UUID, tag: str) -> tuple[User, list[str]]:
    tag = arguments.tag(tag)
    user = await find_user(session, who)
    removed = await session.exec(delete(UserTag).where(col(UserTag.user_id) == user.id, col(UserTag.tag) == tag))
    if not removed.rowcount:
        raise NotFound(f"{user.name!r} has no tag {tag!r}.")
    await session.commit()
    return user, (await tags_of(session, user.id))[user.id]


async def admin_name(session: AsyncSession, user_id: uuid.UUID) -> str | None:
    """The name of the User when it is an admin (it may use the admin routes), else None."""
    row = (await session.exec(select(User.name, User.role).where(User.id == user_id))).first()
    return row[0] if row is not None and row[1] == Role.admin else None
