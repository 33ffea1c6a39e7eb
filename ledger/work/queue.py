"""The Runner's queues: background work as rows of the `work` table.

Every state change is one short transaction that locks the row it changes:

- `claim` takes the oldest runnable rows of a kind under a lease, while fewer
  than the kind's `max_running` run (the `work_queues` row it locks makes
  that count exact across Runner replicas; `FOR UPDATE SKIP LOCKED` on the
  candidate lets them pass each other);
- `renew` extends the leases of one Runner; `requeue` puts a row that a
  stopping Runner gives up back to `queued` and releases its Hold, so the cut
  attempt costs nothing; `recover_lapsed` does the same for a row whose lease
  expired (its Runner died), or fails it where its kind's queue row says so
  (a Playground Run keeps what it wrote), its Hold released too;
- `finish` ends the attempt's Hold and writes the result in one transaction:
  a request is charged once, and a row with its answer never runs again;
- `cancel` ends a queued row at once, and a running one with its whole Hold.

Functions that write commit themselves. Ordering and caps are queries here,
not state in a process, so a Runner can restart or run as several replicas.
"""
from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Awaitable, Callable

import sqlalchemy
from sqlalchemy import and_, case, exists, func, or_, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.store.columns import table_of
from ledger.accounts.tables import ApiKey, KeyStatus, Standing, User
from ledger.tokens.tables import Counting, Hold, UsageStatus
from ledger.work.tables import ENDED, Work, WorkKind, WorkQueue, WorkStatus
from ledger.tokens.holds import end_hold_within


@dataclass(frozen=True)
class HoldEnd:
    """How an attempt's Hold ends, written with its result."""

    used: int | None  # None: released, the attempt costs nothing
    counting: Counting | None
    status: UsageStatus
    whole: bool = False  # pay the whole Hold (a cancel of a running attempt)


RELEASE = HoldEnd(None, None, UsageStatus.failed)
WHOLE = HoldEnd(None, Counting.held, UsageStatus.stopped, whole=True)


@dataclass(frozen=True)
class Result:
    status: WorkStatus
    http_status: int
    body: str  # JSON text of the answer
    # The kind's own rows, written in the transaction that ends the row (a Loom Node's end);
    # it does not run when the row is no longer this attempt's (cancelled, requeued). It must not commit.
    also: Callable[[AsyncSession], Awaitable[None]] | None = None


async def enqueue_within(session: AsyncSession, work: Work, allowed: Callable[[Counts], bool],
                         now: datetime) -> Work | Counts:
    """Queue `work` when `allowed(counts)`, else the counts that refused it.

    The kind's queue row is locked while it counts and inserts, so two
    submits at once never pass a cap together.
    """
    await session.exec(select(WorkQueue.kind).where(WorkQueue.kind == work.kind).with_for_update())
    current = await _counts(session, work.kind, work.user_id, work.key_id, now)
    if not allowed(current):
        await session.rollback()
        return current
    session.add(work)
    await session.commit()
    await session.refresh(work)
    return work


async def find(session: AsyncSession, work_id: uuid.UUID, user_id: uuid.UUID, kind: WorkKind) -> Work | None:
    """A User's own row: another User's id finds nothing."""
    query = select(Work).where(Work.id == work_id, Work.user_id == user_id, Work.kind == kind)
    return await _detached(session, (await session.exec(query)).first())


# -- the claim ------------------------------------------------------------------------------------


def _runnable(kind: WorkKind, model_ids: list[str]):
    """Queued, of a model this Runner serves, of a usable key (a paused key's work
    waits) or of no key (a Playground Run), and of a User in good standing."""
    usable_key = or_(col(Work.key_id).is_(None), col(ApiKey.status) == KeyStatus.active)
    return and_(col(Work.kind) == kind, col(Work.status) == WorkStatus.queued, col(Work.model_id).in_(model_ids),
                usable_key, col(User.standing) == Standing.active)


async def queued_kinds(session: AsyncSession, kinds: list[WorkKind], model_ids: list[str]) -> set[WorkKind]:
    """Which of `kinds` have queued work: an idle Runner's one read a poll for all its queues."""
    found = (await session.exec(select(Work.kind).where(
        col(Work.kind).in_(kinds), Work.status == WorkStatus.queued, col(Work.model_id).in_(model_ids))
        .distinct())).all()
    await session.rollback()
    return {WorkKind(kind) for kind in found}


async def any_queued(session: AsyncSession, kind: WorkKind, model_ids: list[str]) -> bool:
    """A read without locks: an idle Runner polls this, not the claim, which writes."""
    found = (await session.exec(select(Work.id).where(
        Work.kind == kind, Work.status == WorkStatus.queued, col(Work.model_id).in_(model_ids)).limit(1))).first()
    await session.rollback()
    return found is not None


async def claim(session: AsyncSession, kind: WorkKind, model_ids: list[str], owner: str, lease_s: float,
                now: datetime) -> list[Work]:
    """The next rows to run, now `running` under `owner`'s lease; none when none may start.

    The kind's queue row says its order: with `fair_to_users` (Jobs, "The
    order of the work") the oldest row of a User with no row running, and a
    row of a User who has one only when no other waits, one row a claim, since
    each claim changes who has one running; else the oldest first, as many as
    the kind has free places, in one transaction (a Branch's 8 Nodes start together).
    """
    cap, fair = (await session.exec(select(WorkQueue.max_running, WorkQueue.fair_to_users)
                                    .where(WorkQueue.kind == kind).with_for_update())).one()
    running = (await session.exec(select(func.count()).select_from(Work)
                                  .where(Work.kind == kind, Work.status == WorkStatus.running))).one()
    if running >= cap:
        await session.rollback()
        return []
    query = (select(Work).outerjoin(ApiKey, col(ApiKey.id) == Work.key_id).join(User, col(User.id) == Work.user_id)
             .where(_runnable(kind, model_ids))
             .order_by(*_claim_order(kind, fair))
             .limit(1 if fair else cap - running).with_for_update(of=table_of(Work), skip_locked=True))
    claimed = list((await session.exec(query)).all())
    if not claimed:
        await session.rollback()
        return []
    for work in claimed:
        work.status = WorkStatus.running
        work.lease_owner, work.lease_until = owner, now + timedelta(seconds=lease_s)
        work.attempts += 1
        work.started_at = work.started_at or now
        work.hold_id = None
        session.add(work)
    await session.commit()
    for work in claimed:
        await session.refresh(work)
    return claimed


def _claim_order(kind: WorkKind, fair_to_users: bool) -> list:
    oldest = [Work.created_at, Work.id]
    if not fair_to_users:
        return oldest
    other = table_of(Work).alias("other")
    busy = exists().where(other.c.kind == kind.value, other.c.status == WorkStatus.running.value,
                          other.c.user_id == Work.user_id)
    return [case((busy, 1), else_=0), *oldest]


async def attach_hold(session: AsyncSession, work_id: uuid.UUID, owner: str, hold_id: uuid.UUID,
                      attempt: int) -> bool:
    """Record the attempt's Hold; False when the row is no longer this attempt's to run."""
    result = await session.exec(update(Work).where(
        col(Work.id) == work_id, col(Work.status) == WorkStatus.running, col(Work.lease_owner) == owner,
        col(Work.attempts) == attempt).values(hold_id=hold_id))
    await session.commit()
    return result.rowcount == 1


# -- leases -----------------------------------------------------------------------------------------


async def renew(session: AsyncSession, owner: str, until: datetime) -> set[uuid.UUID]:
    """Extend `owner`'s leases; the ids it still runs (a cancel or a lost lease drops one)."""
    mine = and_(col(Work.lease_owner) == owner, col(Work.status) == WorkStatus.running)
    await session.execute(update(Work).where(mine).values(lease_until=until))
    ids = set((await session.exec(select(Work.id).where(mine))).all())
    await session.commit()
    return ids


async def heartbeat(session: AsyncSession, kinds: list[WorkKind], now: datetime) -> None:
    await session.execute(update(WorkQueue).where(col(WorkQueue.kind).in_(kinds)).values(polled_at=now))
    await session.commit()


@dataclass(frozen=True)
class QueueState:
    kind: WorkKind
    running: int
    queued: int
    polled_at: datetime | None


async def queue_states(session: AsyncSession) -> list[QueueState]:
    """Each kind's Runners as GET /health shows them."""
    def count_of(status: WorkStatus):
        return (select(func.count()).select_from(Work)
                .where(Work.kind == WorkQueue.kind, Work.status == status).scalar_subquery())

    rows = (await session.exec(select(WorkQueue.kind, count_of(WorkStatus.running), count_of(WorkStatus.queued),
                                      WorkQueue.polled_at).order_by(WorkQueue.kind))).all()
    await session.rollback()
    return [QueueState(WorkKind(kind), running, queued, polled_at) for kind, running, queued, polled_at in rows]


async def running_of(session: AsyncSession, owner: str) -> set[uuid.UUID]:
    ids = set((await session.exec(select(Work.id).where(
        Work.lease_owner == owner, Work.status == WorkStatus.running))).all())
    await session.rollback()
    return ids


async def expired(session: AsyncSession, now: datetime) -> list[Work]:
    """Running rows whose Runner stopped renewing: it died (kill -9, a lost node). Detached,
    so that the caller can name each row's kind and ask its handler for a failure's result."""
    rows = list((await session.exec(select(Work).where(
        Work.status == WorkStatus.running, col(Work.lease_until) < now))).all())
    for work in rows:
        session.expunge(work)
    await session.rollback()
    return rows


async def requeue(session: AsyncSession, work_id: uuid.UUID, now: datetime, owner: str | None = None) -> bool:
    """Back to `queued`, its Hold released: `owner`'s own row (a planned stop), or
    without an owner a row whose lease expired. False when neither holds any more."""
    work = await _locked(session, work_id)
    if work is None or not _cut(work, now, owner):
        await session.rollback()
        return False
    await _back_to_queue(session, work, now)
    return True


class Recovered(str, enum.Enum):
    """What became of a row whose lease lapsed."""

    requeued = "requeued"
    failed = "failed"


async def recover_lapsed(session: AsyncSession, work_id: uuid.UUID, now: datetime,
                         failed: Callable[[Work], Result] | None, kept_for: timedelta) -> Recovered | None:
    """A row whose Runner died, by its kind's queue row (`fail_on_lost_lease`): back to `queued`
    to run again (Jobs, Nodes, harvests), or ended with `failed(row)`, the result of its kind's
    handler for work that the platform failed to run (a Playground Run: it keeps what it wrote).
    Its Hold is released either way, so the cut attempt costs nothing. None when the row's lease
    no longer lapsed (renewed, ended, erased meanwhile), or when it is to fail and no `failed`
    was given (this Runner does not run its kind: a Runner that does will end it)."""
    work = await _locked(session, work_id)
    if work is None or not _cut(work, now, None):
        await session.rollback()
        return None
    fails = (await session.exec(select(WorkQueue.fail_on_lost_lease).where(WorkQueue.kind == work.kind))).first()
    if not fails:
        await _back_to_queue(session, work, now)
        return Recovered.requeued
    if failed is None:
        await session.rollback()
        return None
    await _end_attempt_hold(session, work, RELEASE, now)
    await _end(session, work, failed(work), now, kept_for)
    await session.commit()
    return Recovered.failed


def _cut(work: Work, now: datetime, owner: str | None) -> bool:
    """Running, and either `owner`'s own (a planned stop) or, without an owner, past its lease."""
    mine = owner is not None and work.lease_owner == owner
    lapsed = owner is None and work.lease_until is not None and work.lease_until < now
    return work.status == WorkStatus.running and (mine or lapsed)


async def _back_to_queue(session: AsyncSession, work: Work, now: datetime) -> None:
    await _end_attempt_hold(session, work, RELEASE, now)
    work.status, work.lease_owner, work.lease_until, work.hold_id = WorkStatus.queued, "", None, None
    session.add(work)
    await session.commit()


# -- ends -------------------------------------------------------------------------------------------


async def finish(session: AsyncSession, work_id: uuid.UUID, owner: str, result: Result, hold: HoldEnd,
                 now: datetime, kept_for: timedelta, attempt: int) -> bool:
    """The attempt's answer and its Hold's end, together; False (nothing written) when the
    row is no longer this attempt's running row: cancelled, or requeued after a lost lease.

    The attempt's number counts, not only its owner: a Runner that stalled past its own lease
    requeues its row and may claim it again, and the cut attempt's late answer must not end
    the new attempt's Hold."""
    work = await _locked(session, work_id)
    if work is None or work.status != WorkStatus.running or work.lease_owner != owner or work.attempts != attempt:
        await session.rollback()
        return False
    await _end_attempt_hold(session, work, hold, now)
    await _end(session, work, result, now, kept_for)
    await session.commit()
    return True


async def fail_queued(session: AsyncSession, work_id: uuid.UUID, result: Result, now: datetime,
                      kept_for: timedelta) -> bool:
    """End a row that never started (a revoked key, a suspended User); it held nothing."""
    work = await _locked(session, work_id)
    if work is None or work.status != WorkStatus.queued:
        await session.rollback()
        return False
    await _end(session, work, result, now, kept_for)
    await session.commit()
    return True


async def cancel(session: AsyncSession, work_id: uuid.UUID, user_id: uuid.UUID, kind: WorkKind, now: datetime,
                 kept_for: timedelta, *, running_end: HoldEnd = WHOLE, result_body: str | None = None,
                 commit: bool = True) -> Work | None:
    """Cancel a queued or running row of the User; an ended row stays as it is.

    A running attempt's Hold ends by `running_end`: for a Job its whole Hold,
    as a request without a stream that stopped after it reached Inference
    pays; a harvest pays it only once its GPU run started (ledger/work/harvests.py).
    Its Runner sees the row change and stops the work. `result_body`, when
    given, is the cancelled row's body (a harvest's charged tokens). Without
    `commit` the change joins the caller's transaction (a Loom's stop).
    """
    work = await _locked(session, work_id, user_id)
    if work is None or work.kind != kind:
        await session.rollback()
        return None
    if work.status in ENDED:
        return await _detached(session, work)
    if work.status == WorkStatus.running:
        await _end_attempt_hold(session, work, running_end, now)
    if result_body is not None:
        work.result_body = result_body
    work.cancel_requested = True
    work.status, work.finished_at = WorkStatus.cancelled, now
    work.lease_owner, work.lease_until = "", None
    work.result_expires_at = now + kept_for
    session.add(work)
    if commit:
        await session.commit()
        await session.refresh(work)
    return work


async def _end_attempt_hold(session: AsyncSession, work: Work, end: HoldEnd, now: datetime) -> None:
    """The one place where the Hold of a background attempt ends, for every kind:
    with its answer (`finish`), released (`requeue`, `recover_lapsed`), or whole
    (`cancel`), in the transaction that changes the row."""
    if work.hold_id is None:
        return
    used = end.used
    if end.whole:
        used = (await session.exec(select(Hold.tokens).where(Hold.id == work.hold_id))).one()
    await end_hold_within(session, work.hold_id, used=used, counting=end.counting, status=end.status, now=now)


async def _detached(session: AsyncSession, work: Work | None) -> Work | None:
    """End the transaction and keep the row readable (a rollback expires what the session holds)."""
    if work is not None:
        session.expunge(work)
    await session.rollback()
    return work


async def _end(session: AsyncSession, work: Work, result: Result, now: datetime, kept_for: timedelta) -> None:
    if result.also is not None:
        await result.also(session)
    work.status, work.result_status, work.result_body = result.status, result.http_status, result.body
    work.finished_at, work.result_expires_at = now, now + kept_for
    work.lease_owner, work.lease_until = "", None
    session.add(work)


async def _locked(session: AsyncSession, work_id: uuid.UUID, user_id: uuid.UUID | None = None) -> Work | None:
    query = select(Work).where(Work.id == work_id).with_for_update()
    if user_id is not None:
        query = query.where(Work.user_id == user_id)
    return (await session.exec(query)).first()


async def drop_expired_results(session: AsyncSession, now: datetime) -> int:
    """Expired results answer 410 and their rows stay: their bodies go."""
    result = await session.exec(update(Work).where(
        col(Work.result_expires_at) < now, col(Work.result_body).is_not(None)).values(result_body=None))
    await session.commit()
    return result.rowcount


# -- what blocks queued rows for good -----------------------------------------------------------------


@dataclass(frozen=True)
class Unusable:
    work_id: uuid.UUID
    request_id: str
    revoked: bool  # else the User is suspended


async def unusable_queued(session: AsyncSession, kind: WorkKind) -> list[Unusable]:
    """Queued rows whose key was revoked or whose User was suspended: they never run. Work
    without a key (a Playground Run) meets only the second."""
    query = (select(Work.id, Work.request_id, col(ApiKey.status))
             .outerjoin(ApiKey, col(ApiKey.id) == Work.key_id).join(User, col(User.id) == Work.user_id)
             .where(Work.kind == kind, Work.status == WorkStatus.queued,
                    or_(col(ApiKey.status) == KeyStatus.revoked, col(User.standing) == Standing.suspended)))
    rows = (await session.exec(query)).all()
    await session.rollback()
    return [Unusable(work_id, request_id, status == KeyStatus.revoked) for work_id, request_id, status in rows]


# -- the caps ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Counts:
    """Queued or running rows of the key, the User and everyone; ended rows whose results are kept."""

    active_key: int
    active_user: int
    active_all: int
    kept_user: int
    kept_all: int


async def _counts(session: AsyncSession, kind: WorkKind, user_id: uuid.UUID, key_id: uuid.UUID | None,
                  now: datetime) -> Counts:
    active = col(Work.status).in_([WorkStatus.queued, WorkStatus.running])
    kept = and_(col(Work.status).in_(ENDED), col(Work.result_expires_at) > now)

    def count_if(condition):
        return func.coalesce(func.sum(case((condition, 1), else_=0)), 0)

    # SQLAlchemy's select, run by execute: SQLModel's select and exec are typed for at most 4 columns.
    row = (await session.execute(sqlalchemy.select(
        count_if(and_(active, col(Work.key_id) == key_id)), count_if(and_(active, col(Work.user_id) == user_id)),
        count_if(active), count_if(and_(kept, col(Work.user_id) == user_id)), count_if(kept),
    ).where(col(Work.kind) == kind))).one()
    return Counts(*map(int, row))


# -- the operator's view (python -m cluster.admin_cli.commands work ...) -----------------------------------------


async def listing(session: AsyncSession, *, user_id: uuid.UUID | None = None, status: WorkStatus | None = None,
                  limit: int = 50) -> list[Work]:
    """The newest rows first."""
    query = select(Work).order_by(col(Work.created_at).desc()).limit(limit)
    if user_id is not None:
        query = query.where(Work.user_id == user_id)
    if status is not None:
        query = query.where(Work.status == status)
    return list((await session.exec(query)).all())


async def set_max_running(session: AsyncSession, kind: WorkKind, max_running: int) -> None:
    queue = await session.get(WorkQueue, kind, with_for_update=True)
    assert queue is not None, f"no queue row for {kind}: the migrations make one for each kind"
    queue.max_running = max_running
    session.add(queue)
    await session.commit()
