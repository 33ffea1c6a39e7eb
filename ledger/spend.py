"""The spend stop: while it is locked, no new GPU work starts."""
from __future__ import annotations

from sqlalchemy import select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.coltypes import utcnow
from ledger.models import SpendStop


async def spend_stop(session: AsyncSession) -> SpendStop:
    """The stop as it is now, detached from the session."""
    row = (await session.execute(select(SpendStop).where(SpendStop.id == 1))).scalar_one_or_none()
    if row is None:
        await session.rollback()
        return SpendStop(id=1, locked=False)
    session.expunge(row)
    await session.rollback()
    return row


async def set_spend_stop(session: AsyncSession, locked: bool, reason: str = "") -> SpendStop:
    row = (await session.execute(select(SpendStop).where(SpendStop.id == 1).with_for_update())).scalar_one_or_none()
    if row is None:
        row = SpendStop(id=1)
        session.add(row)
    row.locked, row.reason, row.changed_at = locked, reason if locked else "", utcnow()
    await session.commit()
    return row
