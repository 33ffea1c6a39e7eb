"""Selected Users on the Users tab (spec: "Act on many Users at once"): one action on many Users, each
User changed or refused with a reason, in one transaction.

The rules: your own row and deleted Users are never acted on; Suspend and Delete leave admins out
(an admin is changed from their own row); a User that the action does not suit (Suspend of a suspended
User, Remove tag of a User without it) is refused too, so that the answer says why nothing changed."""
from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

from sqlmodel import col, delete, select
from sqlmodel.ext.asyncio.session import AsyncSession

from domain.operations.users import change_standing, delete_user
from ledger.accounts.tables import Role, Standing, User, UserTag
from ledger.errors import LedgerError
from ledger.store.coltypes import utcnow

MOST_USERS = 10_000  # one request's list; the tab selects at most every User there is


class BulkAction(str, enum.Enum):
    suspend = "suspend"
    restore = "restore"
    add_tag = "add_tag"
    remove_tag = "remove_tag"
    set_allowance = "set_allowance"
    delete = "delete"


LEAVES_OUT_ADMINS = {BulkAction.suspend, BulkAction.delete}
LABELS = {BulkAction.suspend: "Suspend", BulkAction.delete: "Delete"}
# The reasons, one sentence each, as the dialog lists them.
NO_SUCH_USER = "No User has this id."
YOUR_OWN = "This is your own account: ask another admin to change it."
DELETED = "This User is deleted: a deleted User cannot be changed."
ADMIN = "{action} leaves admins out: change an admin from their own row."
SUSPENDED_ALREADY = "This User is suspended already."
NOT_SUSPENDED = "This User is not suspended."
HAS_TAG = "This User has the tag {tag} already."
HAS_NO_TAG = "This User has no tag {tag}."


@dataclass(frozen=True)
class Refused:
    user_id: uuid.UUID
    name: str | None
    email: str | None
    reason: str


@dataclass(frozen=True)
class BulkResult:
    changed: list[uuid.UUID]
    refused: list[Refused]


def read_action(value: str) -> BulkAction:
    if value not in BulkAction.__members__:
        raise LedgerError(f"The action is one of {', '.join(BulkAction.__members__)}, not {value!r}.", param="action")
    return BulkAction(value)


async def act_on_users(session: AsyncSession, action: BulkAction, user_ids: list[uuid.UUID], *, acting: uuid.UUID,
                       tag: str | None = None, tokens: int | None = None) -> BulkResult:
    """Do `action` to each User of `user_ids` that it suits, and commit; `tag` for the tag actions (in its one
    form already), `tokens` for Set allowance (None: the platform's default)."""
    if not user_ids:
        raise LedgerError("Select at least one User.", param="user_ids")
    if len(user_ids) > MOST_USERS:
        raise LedgerError(f"One action takes at most {MOST_USERS} Users, not {len(user_ids)}.", param="user_ids")
    if action in (BulkAction.add_tag, BulkAction.remove_tag) and tag is None:
        raise LedgerError("Missing required parameter: 'tag'.", param="tag")
    wanted = list(dict.fromkeys(user_ids))  # the order asked, each User once
    # Locked in one order (their ids), so that two actions at once wait for each other, not deadlock.
    found = {user.id: user for user in await session.exec(
        select(User).where(col(User.id).in_(wanted)).order_by(col(User.id)).with_for_update())}
    tagged = await _with_tag(session, wanted, tag) if tag is not None else set()
    changed: list[uuid.UUID] = []
    refused: list[Refused] = []
    for user_id in wanted:
        user = found.get(user_id)
        if user is None:
            refused.append(Refused(user_id, None, None, NO_SUCH_USER))
        elif (reason := _refusal(action, user, acting, tag, user_id in tagged)) is not None:
            refused.append(Refused(user_id, user.name, user.email, reason))
        else:
            await _act(session, action, user, tag, tokens)
            changed.append(user_id)
    await session.commit()
    return BulkResult(changed, refused)


def _refusal(action: BulkAction, user: User, acting: uuid.UUID, tag: str | None, has_tag: bool) -> str | None:
    if user.id == acting:
        return YOUR_OWN
    if user.deleted_at is not None:
        return DELETED
    if action in LEAVES_OUT_ADMINS and user.role == Role.admin:
        return ADMIN.format(action=LABELS[action])
    if action == BulkAction.suspend and user.standing == Standing.suspended:
        return SUSPENDED_ALREADY
    if action == BulkAction.restore and user.standing != Standing.suspended:
        return NOT_SUSPENDED
    if action == BulkAction.add_tag and has_tag:
        return HAS_TAG.format(tag=tag)
    if action == BulkAction.remove_tag and not has_tag:
        return HAS_NO_TAG.format(tag=tag)
    return None


async def _act(session: AsyncSession, action: BulkAction, user: User, tag: str | None, tokens: int | None) -> None:
    if action == BulkAction.suspend:
        await change_standing(session, user, Standing.suspended)
    elif action == BulkAction.restore:
        await change_standing(session, user, Standing.active)
    elif action == BulkAction.add_tag and tag is not None:
        session.add(UserTag(user_id=user.id, tag=tag))
    elif action == BulkAction.remove_tag:
        await session.exec(delete(UserTag).where(col(UserTag.user_id) == user.id, col(UserTag.tag) == tag))
    elif action == BulkAction.set_allowance:
        user.monthly_allowance = tokens  # as grants.set_allowance does, in this one transaction
        session.add(user)
    elif action == BulkAction.delete:
        await delete_user(session, user, utcnow())
    await session.flush()


async def _with_tag(session: AsyncSession, user_ids: list[uuid.UUID], tag: str) -> set[uuid.UUID]:
    query = select(UserTag.user_id).where(col(UserTag.user_id).in_(user_ids), UserTag.tag == tag)
    return set(await session.exec(query))
