"""The Spend tab: the GPU spend, the amount that pauses new GPU work, and the spend stop with its
changes (spec: "Watch the spend", "Spend limit"). The sums and the stop are `ledger.tokens.spend`'s."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.tokens import spend
from ledger.tokens.tables import SpendStop, SpendStopChange
from domain.operations import arguments
from domain.operations.platform import Platform

CHANGES_SHOWN = 10  # the spec: the newest 10 changes of the stop


@dataclass(frozen=True)
class SpendPage:
    stop: SpendStop
    last_24h_usd: float
    counted_since_clear_usd: float  # what the pause counts: since the last Clear, within 24 hours
    pause_usd: float
    last_counted_at: datetime | None
    by_model: list[spend.ModelSpend]  # the last 24 hours
    changes: list[SpendStopChange]


async def spend_page(session: AsyncSession, platform: Platform) -> SpendPage:
    now = platform.clock()
    return SpendPage(
        stop=await spend.spend_stop(session),
        last_24h_usd=await spend.last_24h(session, now),
        counted_since_clear_usd=await spend.counted_since_clear(session, now),
        pause_usd=platform.spend_pause_usd,
        last_counted_at=await spend.last_counted(session),
        by_model=await spend.by_model(session, now - spend.DAY, now),
        changes=await spend.changes(session, CHANGES_SHOWN),
    )


async def lock(session: AsyncSession, platform: Platform, by: str, reason: str = "") -> SpendPage:
    """Pause new GPU work, with a reason if the admin gives one."""
    await spend.lock(session, by, arguments.short_text(reason, "The reason", param="reason"), platform.clock())
    return await spend_page(session, platform)


async def clear(session: AsyncSession, platform: Platform, by: str) -> SpendPage:
    """Lift the pause, whoever made it: from now on the pause counts the spend from this Clear."""
    await spend.clear(session, by, platform.clock())
    return await spend_page(session, platform)
