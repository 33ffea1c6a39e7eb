"""What GET /metrics reads from the ledger at a scrape: a few indexed counts in one session.

Each count is the same whichever process reads it, so a scrape of any ingress
replica agrees with the others.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.tokens.tables import Hold, HoldState
from ledger.work.tables import Harvest, Work, WorkKind, WorkStatus
from ledger.tokens.spend import last_24h, spend_stop


@dataclass(frozen=True)
class LedgerGauges:
    holds_running: dict[tuple[str, str], int]  # (model, source) -> Holds not ended
    work: dict[tuple[str, str], int]  # (kind, status) -> rows of background work
    harvest_prompts: dict[str, tuple[int, int]]  # model -> (prompts done, prompts) of running harvests
    spend_24h_usd: float
    spend_stop_locked: bool


async def read_gauges(session: AsyncSession, now: datetime) -> LedgerGauges:
    gauges = LedgerGauges(
        holds_running=await holds_running(session), work=await work_counts(session),
        harvest_prompts=await harvest_progress(session), spend_24h_usd=await last_24h(session, now),
        spend_stop_locked=(await spend_stop(session)).locked,
    )
    await session.rollback()
    return gauges


async def holds_running(session: AsyncSession) -> dict[tuple[str, str], int]:
    rows = await session.exec(select(Hold.model, Hold.source, func.count())
                              .where(Hold.state == HoldState.held).group_by(Hold.model, Hold.source))
    return {(model, _value(source)): int(count) for model, source, count in rows.all()}


async def work_counts(session: AsyncSession) -> dict[tuple[str, str], int]:
    rows = await session.exec(select(Work.kind, Work.status, func.count()).group_by(Work.kind, Work.status))
    return {(_value(kind), _value(status)): int(count) for kind, status, count in rows.all()}


async def harvest_progress(session: AsyncSession) -> dict[str, tuple[int, int]]:
    rows = await session.exec(
        select(Work.model_id, func.sum(Harvest.prompts_done), func.sum(Harvest.n_prompts))
        .join(Harvest, col(Harvest.work_id) == Work.id)
        .where(Work.kind == WorkKind.harvest, Work.status == WorkStatus.running)
        .group_by(Work.model_id))
    return {model: (int(done or 0), int(total or 0)) for model, done, total in rows.all()}


def _value(member: object) -> str:
    return str(getattr(member, "value", member))
