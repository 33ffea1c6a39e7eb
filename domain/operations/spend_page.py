"""The Spend tab: the GPU spend, the amounts that warn the team and that pause new GPU work, and the
spend stop with its changes (spec: "Watch the spend", "Spend limit"). The sums and the stop are
`ledger.tokens.spend`'s."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.tokens import spend
from ledger.tokens.tables import SpendStop, SpendStopChange
from ledger.tokens.usage import check_days
from domain.operations import arguments
from domain.operations.platform import Platform
from domain.operations.usage_report import days_or_this_month

CHANGES_SHOWN = 10  # the spec: the newest 10 changes of the stop
WHO_USED_SPAN = timedelta(hours=48)  # the spec: "Who used each model, last 48 hours"
MODELS_PER_DAY = 5  # "GPU spend per day": the models that cost the most in the days; the rest add up to one


@dataclass(frozen=True)
class SpendDays:
    """Each day's spend of the models that cost the most over the days, the others as one."""

    first: date
    last: date
    models: list[str]  # most spend first
    days: list[tuple[date, dict[str, float]]]  # every day from first to last, each top model's spend
    others: dict[date, float]  # the spend of the other models, by day


@dataclass(frozen=True)
class SpendPage:
    stop: SpendStop
    last_24h_usd: float
    counted_since_clear_usd: float  # what the pause counts: since the last Clear, within 24 hours
    warn_usd: tuple[float, ...]
    pause_usd: float
    last_counted_at: datetime | None
    by_model: list[spend.ModelSpend]  # the last 24 hours
    changes: list[SpendStopChange]
    per_day: SpendDays
    who_used: list[spend.ModelUser]  # the last 48 hours


async def spend_days(session: AsyncSession, first: date, last: date) -> SpendDays:
    check_days(first, last)
    rows = await spend.by_day(session, first, last)
    totals: dict[str, float] = {}
    for row in rows:
        totals[row.model_id] = totals.get(row.model_id, 0.0) + row.usd
    top = [model for model, usd in sorted(totals.items(), key=lambda item: (-item[1], item[0])) if usd > 0]
    top = top[:MODELS_PER_DAY]
    by_day: dict[date, dict[str, float]] = {}
    others: dict[date, float] = {}
    for row in rows:
        if row.model_id in top:
            by_day.setdefault(row.day, {})[row.model_id] = row.usd
        elif row.usd:
            others[row.day] = others.get(row.day, 0.0) + row.usd
    days = [(first + timedelta(days=n), by_day.get(first + timedelta(days=n), {}))
            for n in range((last - first).days + 1)]
    return SpendDays(first, last, top, days, others)


async def spend_page(session: AsyncSession, platform: Platform, first: date | None = None,
                     last: date | None = None) -> SpendPage:
    """The tab, with the GPU spend per day from `first` to `last` (this month up to today by default)."""
    now = platform.clock()
    first, last = days_or_this_month(now, first, last)
    return SpendPage(
        stop=await spend.spend_stop(session),
        last_24h_usd=await spend.last_24h(session, now),
        counted_since_clear_usd=await spend.counted_since_clear(session, now),
        warn_usd=tuple(amount for amount in platform.spend_warn_usd if amount > 0),
        pause_usd=platform.spend_pause_usd,
        last_counted_at=await spend.last_counted(session),
        by_model=await spend.by_model(session, now - spend.DAY, now),
        changes=await spend.changes(session, CHANGES_SHOWN),
        per_day=await spend_days(session, first, last),
        who_used=await spend.who_used(session, now - WHO_USED_SPAN, now),
    )


async def lock(session: AsyncSession, platform: Platform, by: str, reason: str = "") -> SpendPage:
    """Pause new GPU work, with a reason if the admin gives one."""
    await spend.lock(session, by, arguments.short_text(reason, "The reason", param="reason"), platform.clock())
    return await spend_page(session, platform)


async def clear(session: AsyncSession, platform: Platform, by: str) -> SpendPage:
    """Lift the pause, whoever made it: from now on the pause counts the spend from this Clear."""
    await spend.clear(session, by, platform.clock())
    return await spend_page(session, platform)
