"""Users: find, make, list with their tags and engagement, show, and the admin's changes to one: standing,
allowance, role, tags, Details, and Delete (a soft one: the rows stay for the ledger)."""
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
from ledger.accounts import identities
from ledger.accounts import user_columns
from ledger.tokens import grants
from ledger.work import harvests
from ledger.accounts import keys
from ledger.tokens import usage
from ledger.store.coltypes import utcnow
from ledger.errors import LedgerError, NotFound
from ledger.accounts.tables import DISCORD_HANDLE_MAX, ORGANIZATION_MAX, Role, Standing, User, UserTag
from domain.operations import arguments
from domain.operations.platform import Platform

# A route acts for an admin; these would lock that admin out of the routes they use.
OWN_ROLE = "You cannot change your own role: ask another admin."
OWN_STANDING = "You cannot suspend yourself: ask another admin."
DELETED = "{name} is deleted: a deleted User cannot be changed."
OWN_DELETE = "You cannot delete yourself: ask another admin."


@dataclass(frozen=True)
class Details:
    """What the Admin page shows of a User beside their numbers. `organization` is what the admin typed in
    Details, else their newest Application's answer (`application_organization`)."""

    email: str | None
    organization: str | None
    typed_organization: str | None
    application_organization: str | None
    discord_handle: str | None
    deleted_at: datetime | None

    @staticmethod
    def of(user: User, application_organization: str | None) -> Details:
        return Details(user.email, user.organization or application_organization, user.organization,
                       application_organization, user.discord_handle, user.deleted_at)


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
    details: Details
    budget_left: int
    api_keys: int  # live keys: not revoked


@dataclass(frozen=True)
class UserPage:
    """A User's page: the account as `usage.account` counts it, and what the Users tab shows."""

    account: usage.Account
    role: Role
    created_at: datetime
    tags: list[str]
    activity: analytics.Activity
    details: Details


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
    wanted = None if tag is None else arguments.tag(tag)
    users = await keys.list_users(session)
    tags = await tags_of(session)
    if wanted is not None:
        users = [user for user in users if wanted in tags[user.id]]
    active = await analytics.activity(session, platform.clock())
    organizations = await user_columns.application_organizations(session)
    budgets, live_keys = await user_columns.budgets_left(session), await user_columns.live_key_counts(session)
    return [_line(user, tags[user.id], active.get(user.id, analytics.NO_ACTIVITY), platform,
                  Details.of(user, organizations.get(user.id)), budgets.get(user.id, 0), live_keys.get(user.id, 0))
            for user in users]


def _line(user: User, tags: list[str], activity: analytics.Activity, platform: Platform, details: Details,
          budget_left: int, api_keys: int) -> UserLine:
    own = user.monthly_allowance
    return UserLine(user.id, user.name, user.role, user.standing, platform.monthly_allowance if own is None else own,
                    own is None, user.created_at, tags, activity, details, budget_left, api_keys)


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
    details = Details.of(user, (await user_columns.application_organizations(session)).get(user_id))
    now = platform.clock()
    found = await usage.account(session, user, now=now)
    if found.allowance_is_default:  # usage.account knows only the built-in default
        found = replace(found, allowance=platform.monthly_allowance)
    tags = (await tags_of(session, user_id))[user_id]
    activity = (await analytics.activity(session, now)).get(user_id, analytics.NO_ACTIVITY)
    return UserPage(found, role, created_at, tags, activity, details)


async def set_standing(session: AsyncSession, who: str | uuid.UUID, standing: Standing, *,
                       acting: uuid.UUID | None = None) -> User:
    user = changeable(await find_user(session, who))
    if acting == user.id and standing == Standing.suspended:
        raise LedgerError(OWN_STANDING)
    await change_standing(session, user, standing)
    await session.commit()
    return user


async def change_standing(session: AsyncSession, user: User, standing: Standing) -> None:
    """Suspend or restore, without a commit. The Runner fails the queued work of a suspended User; a
    suspension ends the User's App sessions (the spec)."""
    await keys.set_standing(session, user, standing)
    if standing == Standing.suspended:
        await app_sessions.end_all(session, user.id, utcnow())


def changeable(user: User) -> User:
    """The User, unless deleted: a deleted User's rows stay for the ledger, and nothing changes them again
    (a Restore would let them ask for a password link)."""
    if user.deleted_at is not None:
        raise LedgerError(DELETED.format(name=user.name))
    return user


async def delete_one(session: AsyncSession, who: str | uuid.UUID, *, acting: uuid.UUID | None = None) -> User:
    """Delete one User from their own row (their page), an admin too; never yourself, never twice."""
    user = changeable(await find_user(session, who))
    if acting == user.id:
        raise LedgerError(OWN_DELETE)
    await delete_user(session, user, utcnow())
    await session.commit()
    return user


async def delete_user(session: AsyncSession, user: User, now: datetime) -> None:
    """A soft delete, without a commit: the User is suspended (so their queued work fails and they cannot
    sign in, as a suspension does), every key revoked, their password gone, and `deleted_at` set. The
    Holds, Grants and Completions keep naming them."""
    await change_standing(session, user, Standing.suspended)
    await user_columns.revoke_all_keys(session, user.id)
    await identities.unlink_all(session, user.id)  # no provider signs a deleted User in, nor holds their address
    user.password_hash, user.deleted_at = None, now
    session.add(user)
    await session.flush()


async def set_details(session: AsyncSession, who: str | uuid.UUID,
                      given: dict[str, str | None]) -> tuple[User, Details]:
    """Details on the User's page, `organization` and `discord_handle`, each that `given` has: trimmed, and an
    empty one (or None) clears it. Both are read before either is written, so a refusal changes nothing."""
    user = changeable(await find_user(session, who))
    written = {name: _detail(value, name, *DETAILS[name]) for name, value in given.items()}
    for name, value in written.items():
        setattr(user, name, value)
    session.add(user)
    await session.flush()
    details = Details.of(user, (await user_columns.application_organizations(session)).get(user.id))
    await session.commit()
    return user, details


DETAILS = {"organization": ("An organization", ORGANIZATION_MAX),
           "discord_handle": ("A Discord handle", DISCORD_HANDLE_MAX)}


def _detail(value: str | None, param: str, what: str, most: int) -> str | None:
    written = (value or "").strip()
    if len(written) > most:
        raise LedgerError(f"{what} has at most {most} characters; this one has {len(written)}.", param=param)
    if any(character in written for character in "\r\n\t"):
        raise LedgerError(f"{what} is one line, without tabs.", param=param)
    return written or None


async def set_allowance(session: AsyncSession, platform: Platform, who: str | uuid.UUID,
                        tokens: int | None) -> tuple[User, int]:
    """None: back to the platform's default. Returns the User and the allowance that now applies."""
    user = changeable(await find_user(session, who))
    await grants.set_allowance(session, user.id, tokens)
    return user, platform.monthly_allowance if tokens is None else tokens


async def set_harvest_quota(session: AsyncSession, who: str | uuid.UUID, quota: int | None) -> tuple[User, int]:
    """The harvests that each key of the User may start in a UTC month; None: the spec's 200."""
    user = await find_user(session, who)
    await harvests.set_quota(session, user.id, quota)
    return user, harvests.DEFAULT_MONTHLY_QUOTA if quota is None else quota


async def set_role(session: AsyncSession, who: str | uuid.UUID, role: Role, *,
                   acting: uuid.UUID | None = None) -> User:
    user = changeable(await find_user(session, who))
    if acting == user.id and role != user.role:
        raise LedgerError(OWN_ROLE, param="role")
    user.role = role
    session.add(user)
    await session.commit()
    return user


async def add_tag(session: AsyncSession, who: str | uuid.UUID, tag: str) -> tuple[User, list[str]]:
    """Put a tag on a User (written in its one form); a tag that is there already stays once."""
    tag = arguments.tag(tag)
    user = changeable(await find_user(session, who))
    if await session.get(UserTag, (user.id, tag)) is None:
        session.add(UserTag(user_id=user.id, tag=tag))
        await session.commit()
    return user, (await tags_of(session, user.id))[user.id]


async def remove_tag(session: AsyncSession, who: str | uuid.UUID, tag: str) -> tuple[User, list[str]]:
    tag = arguments.tag(tag)
    user = changeable(await find_user(session, who))
    removed = await session.exec(delete(UserTag).where(col(UserTag.user_id) == user.id, col(UserTag.tag) == tag))
    if not removed.rowcount:
        raise NotFound(f"{user.name!r} has no tag {tag!r}.")
    await session.commit()
    return user, (await tags_of(session, user.id))[user.id]


async def admin_name(session: AsyncSession, user_id: uuid.UUID) -> str | None:
    """The name of the User when it is an admin (it may use the admin routes), else None."""
    row = (await session.exec(select(User.name, User.role).where(User.id == user_id))).first()
    return row[0] if row is not None and row[1] == Role.admin else None
