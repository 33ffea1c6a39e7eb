"""Admin changes to what a User may spend: Grants, set Budgets, allowances."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.store.coltypes import utcnow
from ledger.accounts.tables import User
from ledger.tokens.tables import Budget, Grant, MonthlyUsage
from ledger.tokens.holds import DEFAULT_MONTHLY_ALLOWANCE, month_of


async def _budget(session: AsyncSession, user_id: uuid.UUID, key_id: uuid.UUID | None) -> Budget:
    query = select(Budget).where(col(Budget.user_id) == user_id)
    query = query.where(col(Budget.key_id) == key_id) if key_id else query.where(col(Budget.key_id).is_(None))
    budget = (await session.execute(query.with_for_update())).scalar_one_or_none()
    if budget is None:
        budget = Budget(user_id=user_id, key_id=key_id, tokens=0)
        session.add(budget)
    return budget


async def grant(session: AsyncSession, user_id: uuid.UUID, tokens: int, *,
                key_id: uuid.UUID | None = None, note: str = "") -> Budget:
    """Add tokens to the User's Budget, or to one key's own Budget."""
    if tokens <= 0:
        raise ValueError("a Grant adds a positive number of tokens")
    budget = await _budget(session, user_id, key_id)
    budget.tokens += tokens
    session.add(Grant(user_id=user_id, key_id=key_id, tokens=tokens, note=note))
    await session.commit()
    return budget


async def set_budget(session: AsyncSession, user_id: uuid.UUID, tokens: int, *,
                     key_id: uuid.UUID | None = None) -> Budget:
    """An admin sets the Budget to a number (it can then shrink too)."""
    if tokens < 0:
        raise ValueError("a Budget is 0 tokens or more")
    budget = await _budget(session, user_id, key_id)
    budget.tokens = tokens
    await session.commit()
    return budget


async def set_allowance(session: AsyncSession, user_id: uuid.UUID, tokens: int | None) -> None:
    """None goes back to the platform's default allowance."""
    if tokens is not None and tokens < 0:
        raise ValueError("an allowance is 0 tokens or more")
    user = (await session.execute(select(User).where(col(User.id) == user_id))).scalar_one()
    user.monthly_allowance = tokens
    await session.commit()


@dataclass(frozen=True)
class Standing:
    """What a User (and a key) have left now, after the Holds of running requests."""

    allowance: int
    allowance_used: int
    budget: int
    key_budget: int | None

    @property
    def allowance_left(self) -> int:
        return max(0, self.allowance - self.allowance_used)


async def standing(session: AsyncSession, user_id: uuid.UUID, key_id: uuid.UUID | None = None,
                   now: datetime | None = None, default_allowance: int = DEFAULT_MONTHLY_ALLOWANCE) -> Standing:
    allowance = (await session.execute(select(col(User.monthly_allowance))
                                       .where(col(User.id) == user_id))).scalar_one()
    month = (await session.execute(select(col(MonthlyUsage.used)).where(
        col(MonthlyUsage.user_id) == user_id, col(MonthlyUsage.month) == month_of(now or utcnow()))
    )).scalar_one_or_none()
    budgets = {b.key_id: b.tokens for b in (await session.execute(
        select(Budget).where(col(Budget.user_id) == user_id))).scalars()}
    await session.rollback()
    allowance = default_allowance if allowance is None else allowance
    return Standing(allowance, month or 0, budgets.get(None, 0), budgets.get(key_id) if key_id else None)
