"""Harvests in the ledger: a `work` row of kind `harvest` and its `harvests` row.

- `enqueue` counts the caps and inserts both rows under the lock of the
  kind's `work_queues` row, so two submits at once never pass a cap together
  (the spec's Limits, Harvests): a key's harvests of the UTC month, a User's
  harvests `pending` or `running` on small and on large models, and those of
  all Users on large models;
- `find` reads one of a User's harvests; `progress` how far runs got;
- `cancel` ends a pending or running harvest: a running one whose GPU run
  started pays its whole Hold, any other cancel costs nothing.

Every function takes `now`, so tests set the clock. Functions that write commit.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from sqlalchemy import and_, case, func, or_, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.work import queue as queue
from ledger.accounts.tables import User
from ledger.tokens.tables import Hold, UsageSource
from ledger.work.tables import Harvest, Work, WorkKind, WorkQueue, WorkStatus
from ledger.tokens.holds import HoldAsk, next_month_start

DEFAULT_MONTHLY_QUOTA = 200
SMALL, LARGE = "small", "large"
ACTIVE = (WorkStatus.queued, WorkStatus.running)
# The spec keeps a harvest's files with no end, so its row's result is never dropped
# as an expired Job result is (ledger.work.queue.drop_expired_results).
KEPT_FOR = timedelta(days=365 * 100)


@dataclass(frozen=True)
class HarvestCaps:
    """The Harvests table of the spec's Limits."""

    month_per_key: int = DEFAULT_MONTHLY_QUOTA  # a User's own `harvest_quota` replaces it
    small_per_user: int = 3
    large_per_user: int = 1
    large_in_all: int = 2

    def per_user(self, model_class: str) -> int:
        return self.large_per_user if model_class == LARGE else self.small_per_user


CAPS = HarvestCaps()


@dataclass(frozen=True)
class HarvestCounts:
    month_key: int     # the key's harvests this UTC month that count toward its quota
    quota: int         # the key's quota (the User's own, or the default)
    user_active: int   # the User's pending or running harvests on models of this class
    large_active: int  # all Users' pending or running harvests on large models


@dataclass(frozen=True)
class CapFull:
    """Why a harvest was not queued: the cap (`quota`, `concurrency`, `capacity`) and its number."""

    cap: str
    limit: int
    model_class: str
    counts: HarvestCounts


def month_bounds(now: datetime) -> tuple[datetime, datetime]:
    now = now.astimezone(timezone.utc)
    return datetime(now.year, now.month, 1, tzinfo=timezone.utc), next_month_start(now)


def full_cap(counts: HarvestCounts, model_class: str, caps: HarvestCaps = CAPS) -> CapFull | None:
    """The first cap a new harvest would pass, in the order of the Limits table."""
    if counts.month_key >= counts.quota:
        return CapFull("quota", counts.quota, model_class, counts)
    if counts.user_active >= caps.per_user(model_class):
        return CapFull("concurrency", caps.per_user(model_class), model_class, counts)
    if model_class == LARGE and counts.large_active >= caps.large_in_all:
        return CapFull("capacity", caps.large_in_all, model_class, counts)
    return None


async def counts(session: AsyncSession, user_id: uuid.UUID, key_id: uuid.UUID | None, model_class: str, now: datetime,
                 default_quota: int = DEFAULT_MONTHLY_QUOTA) -> HarvestCounts:
    """The numbers of the caps. The month leaves out harvests whose GPU run never started
    and that are no longer pending or running (a cancel while pending, a failure to start)."""
    start, end = month_bounds(now)
    active = col(Work.status).in_(ACTIVE)
    counted = and_(col(Work.key_id) == key_id, col(Work.created_at) >= start, col(Work.created_at) < end,
                   or_(active, col(Harvest.gpu_started_at).is_not(None)))

    def count_if(condition):
        return func.coalesce(func.sum(case((condition, 1), else_=0)), 0)

    row = (await session.exec(
        select(count_if(counted),
               count_if(and_(active, col(Work.user_id) == user_id, col(Harvest.model_class) == model_class)),
               count_if(and_(active, col(Harvest.model_class) == LARGE)))
        .select_from(Work).join(Harvest, col(Harvest.work_id) == Work.id).where(Work.kind == WorkKind.harvest))).one()
    own = (await session.exec(select(User.harvest_quota).where(User.id == user_id))).one()
    month_key, user_active, large_active = map(int, row)
    return HarvestCounts(month_key, default_quota if own is None else int(own), user_active, large_active)


async def enqueue(session: AsyncSession, work: Work, harvest: Harvest, now: datetime,
                  caps: HarvestCaps = CAPS) -> tuple[Work, Harvest] | CapFull:
    """Queue the harvest (`pending`) unless a cap is full; the kind's queue row is locked meanwhile."""
    await session.exec(select(WorkQueue.kind).where(WorkQueue.kind == WorkKind.harvest).with_for_update())
    current = await counts(session, work.user_id, work.key_id, harvest.model_class, now, caps.month_per_key)
    refused = full_cap(current, harvest.model_class, caps)
    if refused is not None:
        await session.rollback()
        return refused
    session.add(work)
    await session.flush()  # the work row first: the harvest row refers to it
    session.add(harvest)
    await session.commit()
    await session.refresh(work)
    await session.refresh(harvest)
    return work, harvest


async def find(session: AsyncSession, work_id: uuid.UUID, user_id: uuid.UUID) -> tuple[Work, Harvest] | None:
    """One of the User's harvests; another User's id finds nothing."""
    query = (select(Work, Harvest).join(Harvest, col(Harvest.work_id) == Work.id)
             .where(Work.id == work_id, Work.user_id == user_id, Work.kind == WorkKind.harvest))
    row = (await session.exec(query)).first()
    if row is not None:
        for instance in row:
            session.expunge(instance)
    await session.rollback()
    return None if row is None else (row[0], row[1])


async def cancel(session: AsyncSession, work_id: uuid.UUID, user_id: uuid.UUID, now: datetime,
                 kept_for: timedelta = KEPT_FOR) -> tuple[Work, Harvest] | None:
    """Cancel one of the User's harvests that is pending or running; an ended one stays as it is.

    A `running` harvest whose GPU run started pays its whole Hold, and its
    `tokens` are that Hold. Any other cancel releases what it holds and costs
    nothing: before the GPU run started, and while `pending` again after a
    restart (the restart released the Hold). Both rows are locked, the work
    row first, as the Runner locks them, so a GPU run that starts meanwhile
    is seen.
    """
    work = (await session.exec(select(Work).where(
        Work.id == work_id, Work.user_id == user_id, Work.kind == WorkKind.harvest).with_for_update())).first()
    if work is None:
        await session.rollback()
        return None
    harvest = (await session.exec(select(Harvest).where(Harvest.work_id == work_id).with_for_update())).one()
    pays = work.status == WorkStatus.running and harvest.gpu_started_at is not None and work.hold_id is not None
    tokens = 0
    if pays:
        tokens = int((await session.exec(select(Hold.tokens).where(Hold.id == work.hold_id))).one())
    ended = await queue.cancel(session, work_id, user_id, WorkKind.harvest, now, kept_for,
                               running_end=queue.WHOLE if pays else queue.RELEASE,
                               result_body=json.dumps({"tokens": tokens}))
    return None if ended is None else await find(session, work_id, user_id)


async def progress(session: AsyncSession, work_ids: list[uuid.UUID]) -> dict[uuid.UUID, tuple[int, int]]:
    """(prompts done, prompts) of each of these rows that is a harvest."""
    if not work_ids:
        return {}
    rows = (await session.exec(select(Harvest.work_id, Harvest.prompts_done, Harvest.n_prompts)
                               .where(col(Harvest.work_id).in_(work_ids)))).all()
    return {work_id: (int(done), int(total)) for work_id, done, total in rows}


async def set_quota(session: AsyncSession, user_id: uuid.UUID, quota: int | None) -> None:
    """The harvests each key of the User may start in a UTC month; None: the default."""
    await session.execute(update(User).where(col(User.id) == user_id).values(harvest_quota=quota))
    await session.commit()


# -- the Runner's side: the run it follows and how far it got ----------------------------------------------


def hold_ask(user_id: uuid.UUID, key_id: uuid.UUID | None, model_id: str, reserved_tokens: int,
             request_id: str) -> HoldAsk:
    """The Hold a harvest takes when it starts: its prompts' tokens, no generated ones, never lowered."""
    return HoldAsk(user_id=user_id, key_id=key_id, model=model_id, prompt_tokens=reserved_tokens, choices=0,
                   max_tokens=0, may_lower=False, source=UsageSource.harvest, request_id=request_id)


async def load(session: AsyncSession, work_id: uuid.UUID) -> Harvest:
    harvest = (await session.exec(select(Harvest).where(Harvest.work_id == work_id))).one()
    session.expunge(harvest)
    await session.rollback()
    return harvest


async def record_run(session: AsyncSession, work_id: uuid.UUID, owner: str, *, run_name: str | None = None,
                     prompts_done: int | None = None, gpu_started_at: datetime | None = None) -> bool:
    """Write what the run reports while `owner` runs the row; False when the row is
    no longer its (cancelled, or its lease lapsed). A GPU start is written once."""
    mine = (await session.exec(select(Work.id).where(
        Work.id == work_id, Work.status == WorkStatus.running, Work.lease_owner == owner).with_for_update())).first()
    if mine is None:
        await session.rollback()
        return False
    values: dict = {}
    if run_name is not None:
        values["run_name"] = run_name
    if prompts_done is not None:
        values["prompts_done"] = prompts_done
    if values:
        await session.execute(update(Harvest).where(col(Harvest.work_id) == work_id).values(**values))
    if gpu_started_at is not None:
        await session.execute(update(Harvest).where(col(Harvest.work_id) == work_id,
                                                    col(Harvest.gpu_started_at).is_(None))
                              .values(gpu_started_at=gpu_started_at))
    await session.commit()
    return True
