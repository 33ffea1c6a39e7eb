"""The requests that the tokens could not hold (429 budget_exceeded), kept so the
Analytics' Budget tab can count them ("the requests that the Budget could not hold")."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.tokens.tables import BudgetRefusal


async def record_refusal(session: AsyncSession, ask: Any, now: datetime) -> None:
    """`ask` is the HoldAsk that did not fit."""
    session.add(BudgetRefusal(at=now, user_id=ask.user_id, key_id=ask.key_id, model=ask.model,
                              source=ask.source.value, tokens=ask.tokens()))
    await session.commit()


async def refusals_between(session: AsyncSession, start: datetime, end: datetime) -> int:
    return (await session.exec(select(func.count()).select_from(BudgetRefusal).where(
        BudgetRefusal.at >= start, BudgetRefusal.at < end))).one()
