"""The GPU spend and the spend stop (spec: "Watch the spend", "Spend limit").

The spend is an estimate, not a cloud's bill: each minute the Runner counts the
replicas of each model and records what their GPUs cost over that minute
(`record_samples`). A sample at `at` covers the `seconds` before it, so a span
(start, end] holds the samples taken in it.

The stop is the one `spend_stop` row that the API reads: while it is locked,
new GPU work gets 429 spend_cap. An admin's Lock and Clear and the platform's
own pause each set it and are recorded in `spend_stop_changes` with who made
them. The pause counts the last 24 hours, but nothing before the last Clear,
so a Clear is never undone by the spend that it lifted; only a Clear lifts it.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from sqlalchemy import func, select
from sqlmodel import col
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.store import driver_sql
from ledger.store.coltypes import utcnow
from ledger.store.columns import table_of
from ledger.accounts.tables import User
from ledger.tokens.tables import Hold, HoldState, SpendSample, SpendStop, SpendStopChange, StopChangeKind
from ledger.tokens.usage import midnight, utc_day

DAY = timedelta(hours=24)
# Who made a pause at the stop amount: no admin, the platform itself.
PLATFORM = "platform"


@dataclass(frozen=True)
class Sample:
    """What one model's replicas ran over the last `seconds`, at their GPUs' price."""

    model_id: str
    replicas: int
    gpus_per_replica: float
    gpu_hour_usd: float
    seconds: float

    @property
    def gpus(self) -> float:
        return self.replicas * self.gpus_per_replica

    @property
    def usd(self) -> float:
        return self.gpus * self.gpu_hour_usd * self.seconds / 3600


@dataclass(frozen=True)
class ModelSpend:
    model_id: str
    usd: float
    gpu_hours: float


# -- samples and sums ------------------------------------------------------------------------------------

async def record_samples(session: AsyncSession, samples: Iterable[Sample], now: datetime) -> None:
    """One row per model, also for a model with no replica: the rows say when the platform last counted."""
    session.add_all([SpendSample(at=now, model_id=sample.model_id, replicas=sample.replicas, gpus=sample.gpus,
                                 seconds=sample.seconds, usd=sample.usd) for sample in samples])
    await session.commit()


async def spend_between(session: AsyncSession, start: datetime, end: datetime) -> float:
    """The spend of the samples taken in (start, end]."""
    query = (select(func.coalesce(func.sum(SpendSample.usd), 0.0))
             .where(col(SpendSample.at) > start, col(SpendSample.at) <= end))
    total = (await session.execute(query)).scalar_one()
    await session.rollback()
    return float(total)


async def last_24h(session: AsyncSession, now: datetime) -> float:
    return await spend_between(session, now - DAY, now)


async def by_model(session: AsyncSession, start: datetime, end: datetime) -> list[ModelSpend]:
    """Each model's spend and GPU hours in (start, end], the costliest first."""
    usd = func.sum(SpendSample.usd)
    gpu_hours = func.sum(SpendSample.gpus * SpendSample.seconds) / 3600
    query = (select(col(SpendSample.model_id), usd, gpu_hours)
             .where(col(SpendSample.at) > start, col(SpendSample.at) <= end)
             .group_by(col(SpendSample.model_id)).order_by(usd.desc(), col(SpendSample.model_id)))
    rows = (await session.execute(query)).all()
    await session.rollback()
    return [ModelSpend(model_id, float(spent), float(hours)) for model_id, spent, hours in rows]


@dataclass(frozen=True)
class DaySpend:
    day: date
    model_id: str
    usd: float


async def by_day(session: AsyncSession, first: date, last: date) -> list[DaySpend]:
    """The spend of each model on each UTC day from `first` to `last` (the days with samples)."""
    day = utc_day(session, col(SpendSample.at)).label("day")
    query = (select(day, col(SpendSample.model_id), func.sum(SpendSample.usd))
             .where(col(SpendSample.at) >= midnight(first), col(SpendSample.at) < midnight(last + timedelta(days=1)))
             .group_by(day, col(SpendSample.model_id)).order_by(day, col(SpendSample.model_id)))
    rows = (await session.execute(query)).all()
    await session.rollback()
    return [DaySpend(date.fromisoformat(str(d)[:10]), model_id, float(usd)) for d, model_id, usd in rows]


@dataclass(frozen=True)
class ModelUser:
    """One User's Completions of one model in a span, and their part of its spend by their share of its tokens."""

    model_id: str
    user_id: uuid.UUID
    email: str | None
    name: str
    completions: int
    tokens: int
    usd: float


async def who_used(session: AsyncSession, start: datetime, end: datetime) -> list[ModelUser]:
    """Each User's settled Completions of each model that started in [start, end), most tokens
    first within a model; a model's spend in (start, end] is shared by the tokens."""
    tokens = func.sum(col(Hold.used))
    query = (select(col(Hold.model), col(Hold.user_id), col(User.email), col(User.name), func.count(), tokens)
             .join(User, col(User.id) == col(Hold.user_id))
             .where(col(Hold.state) == HoldState.settled, col(Hold.created_at) >= start, col(Hold.created_at) < end)
             .group_by(col(Hold.model), col(Hold.user_id), col(User.email), col(User.name)))
    rows = [(model, user_id, email, name, int(n), int(used or 0))
            for model, user_id, email, name, n, used in (await session.execute(query)).all()]
    await session.rollback()
    spent = {each.model_id: each.usd for each in await by_model(session, start, end)}
    model_tokens: dict[str, int] = {}
    for model, *_, used in rows:
        model_tokens[model] = model_tokens.get(model, 0) + used
    lines = [ModelUser(model, user_id, email, name, n, used,
                       spent.get(model, 0.0) * used / model_tokens[model] if model_tokens[model] else 0.0)
             for model, user_id, email, name, n, used in rows]
    return sorted(lines, key=lambda line: (-spent.get(line.model_id, 0.0), line.model_id, -line.tokens,
                                           line.email or ""))


async def last_counted(session: AsyncSession) -> datetime | None:
    """When the platform last counted its replicas ("When Inference last counted")."""
    at = (await session.execute(select(func.max(SpendSample.at)))).scalar_one()
    await session.rollback()
    return at


async def counted_since_clear(session: AsyncSession, now: datetime) -> float:
    """The spend that the pause counts: the last 24 hours, from the last Clear if that came later."""
    cleared = (await session.execute(select(func.max(SpendStopChange.at))
                                     .where(col(SpendStopChange.kind) == StopChangeKind.clear))).scalar_one()
    since = now - DAY
    if cleared is not None and cleared > since:
        since = cleared
    return await spend_between(session, since, now)


# -- the stop ----------------------------------------------------------------------------------------------

async def lock(session: AsyncSession, by: str, reason: str, now: datetime) -> SpendStop:
    """An admin pauses new GPU work; a Lock while locked keeps it locked with the new reason."""
    return await _change(session, StopChangeKind.lock, locked=True, by=by, reason=reason, now=now)


async def clear(session: AsyncSession, by: str, now: datetime) -> SpendStop:
    """An admin lifts the pause; from now on the pause counts the spend from this Clear."""
    return await _change(session, StopChangeKind.clear, locked=False, by=by, reason="", now=now)


async def pause_at(session: AsyncSession, usd: float, now: datetime, *, counted: float | None = None) -> bool:
    """The platform pauses new GPU work at the stop amount `usd`; False when the stop is on already
    (an admin's Lock or an earlier pause stands, and no second change is recorded)."""
    row = await _stop_row(session)
    if row.locked:
        await session.rollback()
        return False
    spent = usd if counted is None else counted
    reason = f"The GPUs cost ${spent:,.2f} since the last Clear within 24 hours, at the stop of ${usd:,.2f}."
    await _apply(session, row, StopChangeKind.pause, locked=True, by=PLATFORM, reason=reason, now=now, usd=usd)
    return True


async def changes(session: AsyncSession, limit: int = 10) -> list[SpendStopChange]:
    """The newest changes of the stop first."""
    query = (select(SpendStopChange).order_by(col(SpendStopChange.at).desc(), col(SpendStopChange.id).desc())
             .limit(limit))
    rows = list((await session.execute(query)).scalars())
    session.expunge_all()  # readable after the rollback
    await session.rollback()
    return rows


async def spend_stop(session: AsyncSession) -> SpendStop:
    """The stop as it is now, detached from the session."""
    row = (await session.execute(select(SpendStop).where(col(SpendStop.id) == 1))).scalar_one_or_none()
    if row is None:
        await session.rollback()
        return SpendStop(id=1, locked=False)
    session.expunge(row)
    await session.rollback()
    return row


_STOP_LOCKED = select(col(SpendStop.locked)).where(col(SpendStop.id) == 1)


async def spend_stop_locked_on(engine: AsyncEngine) -> bool:
    """Whether the stop is on, in one read on a connection of `engine`'s pool driven by its own
    driver (ledger/store/driver_sql.py): the API asks on its requests, at most once a second."""
    rows = await driver_sql.read(engine, _STOP_LOCKED, {})
    return bool(rows[0][0]) if rows else False


async def set_spend_stop(session: AsyncSession, locked: bool, reason: str = "", by: str = "") -> SpendStop:
    """A Lock or a Clear now, recorded as each is (kept for the callers that name no time)."""
    if locked:
        return await lock(session, by, reason, utcnow())
    return await clear(session, by, utcnow())


async def _change(session: AsyncSession, kind: StopChangeKind, *, locked: bool, by: str, reason: str,
                  now: datetime) -> SpendStop:
    row = await _stop_row(session)
    await _apply(session, row, kind, locked=locked, by=by, reason=reason, now=now)
    return row


async def _stop_row(session: AsyncSession) -> SpendStop:
    """The stop's row, made if it is missing, and locked for the change: a pause and an admin's
    Clear at the same moment are recorded one after the other."""
    from sqlalchemy.dialects import postgresql, sqlite

    insert = (postgresql if session.get_bind().dialect.name == "postgresql" else sqlite).insert
    stop = table_of(SpendStop)
    await session.execute(insert(stop).values(id=1, locked=False, reason="", changed_at=utcnow())
                          .on_conflict_do_nothing(index_elements=[stop.c.id]))
    return (await session.execute(select(SpendStop).where(col(SpendStop.id) == 1).with_for_update())).scalar_one()


async def _apply(session: AsyncSession, row: SpendStop, kind: StopChangeKind, *, locked: bool, by: str,
                 reason: str, now: datetime, usd: float | None = None) -> None:
    row.locked, row.reason, row.changed_at = locked, reason if locked else "", now
    session.add(SpendStopChange(at=now, kind=kind, by=by, reason=reason, usd=usd))
    await session.commit()

