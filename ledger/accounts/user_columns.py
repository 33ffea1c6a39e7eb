"""What the Users tab shows of every User at once beside `analytics.activity`: the organization of each
one's Application, the tokens left in their Budget, and their live keys; and the rows that a Delete
changes. Each read is one query for all Users, so the tab costs the same few queries however many
Users there are."""
from __future__ import annotations

import uuid

from sqlalchemy import func, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.accounts.tables import ApiKey, Application, KeyStatus
from ledger.tokens.tables import Budget


async def application_organizations(session: AsyncSession) -> dict[uuid.UUID, str]:
    """The organization that each User's newest Application answered; a User made by the command line has none."""
    query = (select(Application.user_id, Application.organization).where(col(Application.user_id).is_not(None))
             .order_by(col(Application.created_at)))
    return {user_id: organization for user_id, organization in await session.exec(query) if user_id is not None}


async def budgets_left(session: AsyncSession) -> dict[uuid.UUID, int]:
    """The tokens left in each User's own Budget (not a key's); a User without a Budget row has 0."""
    query = select(Budget.user_id, Budget.tokens).where(col(Budget.key_id).is_(None))
    return {user_id: int(tokens) for user_id, tokens in await session.exec(query)}


async def live_key_counts(session: AsyncSession) -> dict[uuid.UUID, int]:
    """Each User's keys that are not revoked, as API Keys lists them."""
    query = (select(ApiKey.user_id, func.count()).where(col(ApiKey.status) != KeyStatus.revoked)
             .group_by(col(ApiKey.user_id)))
    return {user_id: int(count) for user_id, count in await session.exec(query)}


async def revoke_all_keys(session: AsyncSession, user_id: uuid.UUID) -> int:
    """Revoke every live key of the User (a Delete); returns how many. Flushes, does not commit."""
    result = await session.execute(update(ApiKey).where(col(ApiKey.user_id) == user_id,
                                                        col(ApiKey.status) != KeyStatus.revoked)
                                   .values(status=KeyStatus.revoked).execution_options(synchronize_session=False))
    return int(getattr(result, "rowcount", 0) or 0)

