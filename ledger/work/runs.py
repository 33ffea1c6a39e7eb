"""The Playground's Runs in the ledger: made with their numbers, written as they grow, read,
stopped, deleted, and what expires (spec: "Use the Playground", "Kept data").

A Run is a `playground_runs` row and a `work` row of kind `run` without an API key, made
together. The Runner runs the work row (domain/playground/handler.py); the Run's own columns are
what a read shows. Each write of a running Run is one conditional UPDATE, true only while the
Run is live, growing and written by the same attempt (`work.attempts`): so a Run that a stop
ended keeps the text it had saved, and the late writes of an attempt that a restart or a lost
lease cut are dropped. The start and the growth commit at once; a Run's end joins the
transaction that ends its work row and its Hold (`queue.Result.also`).

Numbers: each User's Runs are numbered 1, 2, 3... in the order started, from a counter row
(`playground_counters`) taken under the lock of the User's row, so two starts at once never
share a number; deleting or erasing Runs leaves it as it is, so no number is used twice.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Iterable

from sqlalchemy import delete, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.accounts.tables import User
from ledger.errors import RunNotFound
from ledger.store.ids import uuid7
from ledger.tokens.tables import Counting, UsageStatus
from ledger.work import queue
from ledger.work.attempt_writes import as_json, changed_one
from ledger.work.tables import (ENDED, RUN_GROWING, PlaygroundActivations, PlaygroundCounter, PlaygroundRun,
                                RunStatus, Work, WorkKind, WorkStatus)

# The spec's Kept data: a deleted Run is erased 14 days later; its Activations are kept 7 days
# after it ended.
KEPT_AFTER_DELETE = timedelta(days=14)
ACTIVATIONS_KEPT = timedelta(days=7)
# The Runs table lists the newest 100 (and the rest of a group that they cut).
NEWEST = 100

NOT_FOUND = "You have no Run with the id {run_id}."
GROUP_NOT_FOUND = "You have no Runs in the group {group_id}."


def run_request_id(run_id: uuid.UUID) -> str:
    """The request id of a Run's Completion: its Holds and engine requests carry it."""
    return f"run-{run_id.hex}"


@dataclass(frozen=True)
class NewRun:
    """One Run to make: its request (the body of POST /v1/completions) and its model, as it was
    asked for, as the catalog's id (a Runner claims only models it serves) and as served."""

    request: dict[str, Any]
    model: str
    model_id: str
    served_model: str
    seed: int | None = None  # the seed it samples with (PlaygroundRun.seed)


# -- making Runs -------------------------------------------------------------------------------------


async def create(session: AsyncSession, user_id: uuid.UUID, new_runs: list[NewRun],
                 now: datetime) -> list[PlaygroundRun]:
    """The User's next Runs, queued, numbered in the order given, in one transaction; more than one
    form a group (a Run all). Commits."""
    numbers = await _take_numbers(session, user_id, len(new_runs))
    group_id = uuid7() if len(new_runs) > 1 else None
    made = []
    for number, new in zip(numbers, new_runs):
        run_id, work_id = uuid7(), uuid7()
        session.add(Work(id=work_id, kind=WorkKind.run, user_id=user_id, key_id=None, model=new.model,
                         model_id=new.model_id, request=json.dumps({"run_id": str(run_id)}),
                         request_id=run_request_id(run_id), created_at=now))
        run = PlaygroundRun(id=run_id, user_id=user_id, number=number, group_id=group_id, work_id=work_id,
                            model=new.model, served_model=new.served_model, request=as_json(new.request) or "{}",
                            seed=new.seed, created_at=now)
        session.add(run)
        made.append(run)
    await session.commit()
    return made


async def _take_numbers(session: AsyncSession, user_id: uuid.UUID, count: int) -> list[int]:
    """The next `count` numbers of the User's Runs. The User's row is locked first, so the first
    Run of a User makes its counter row once, however many start at the same time."""
    await session.exec(select(User.id).where(User.id == user_id).with_for_update())
    counter = await session.get(PlaygroundCounter, user_id, with_for_update=True)
    if counter is None:
        counter = PlaygroundCounter(user_id=user_id, last_number=0)
    first = counter.last_number + 1
    counter.last_number += count
    session.add(counter)
    return list(range(first, first + count))


# -- the writes of a running Run ---------------------------------------------------------------------


def _this_attempt(run_id: uuid.UUID, attempt: int):
    return (col(PlaygroundRun.id) == run_id, col(PlaygroundRun.status) == RunStatus.running,
            col(PlaygroundRun.attempt) == attempt, col(PlaygroundRun.deleted_at).is_(None))


async def start(session: AsyncSession, run_id: uuid.UUID, attempt: int, now: datetime) -> dict[str, Any] | None:
    """The Run runs from the beginning under `attempt`, with no text yet; its request. None when
    it no longer grows (a stop ended it, it was deleted), or a later attempt started it."""
    started = await changed_one(session, update(PlaygroundRun).where(
        col(PlaygroundRun.id) == run_id, col(PlaygroundRun.status).in_(RUN_GROWING),
        col(PlaygroundRun.attempt) <= attempt, col(PlaygroundRun.deleted_at).is_(None),
    ).values(status=RunStatus.running, choices="[]", usage=None, error=None, used_tokens=0, completion_id="",
             attempt=attempt, started_at=now, finished_at=None), commit=False)
    found = (await session.exec(select(PlaygroundRun.request, PlaygroundRun.seed)
                                .where(PlaygroundRun.id == run_id))).first()
    await session.commit()
    if not started or found is None:
        return None
    request, seed = json.loads(found[0]), found[1]
    if request.get("seed") is None and seed is not None:  # the seed chosen for it at its start
        request["seed"] = seed
    return request


@dataclass(frozen=True)
class RunGrowth:
    """A running Run's Completion so far: its id, its choices in the API's shape and its usage,
    whose prompt and generated tokens are what a stop pays (so they are written together)."""

    run_id: uuid.UUID
    attempt: int
    completion_id: str = ""
    choices: tuple[dict[str, Any], ...] | list[dict[str, Any]] = ()
    usage: dict[str, int] | None = None

    @property
    def used_tokens(self) -> int:
        return 0 if self.usage is None else self.usage["total_tokens"]

    def values(self) -> dict[str, Any]:
        return dict(choices=as_json(list(self.choices)), usage=as_json(self.usage), used_tokens=self.used_tokens,
                    completion_id=self.completion_id)


async def progress_all(session: AsyncSession, growths: Iterable[RunGrowth]) -> int:
    """Several Runs' Completions so far, in one transaction (the Runs that grow in one process are
    written together). The number written. The rows are written in the order of their ids, the
    order in which a stop locks them, so the two never wait for each other in a circle."""
    written = 0
    for growth in sorted(growths, key=lambda growth: growth.run_id):
        written += await changed_one(session, update(PlaygroundRun).where(*_this_attempt(growth.run_id, growth.attempt))
                                  .values(**growth.values()), commit=False)
    await session.commit()
    return written


@dataclass(frozen=True)
class RunEnd:
    """A Run's last state: `completed` with its Completion (and its Activations when it read
    them), or `failed` with the error object and the Completion before the failure."""

    status: RunStatus
    growth: RunGrowth
    error: dict[str, Any] | None = None
    activations: dict[str, Any] | None = None
    # What its Hold paid, where that is not its usage's total: a Run that failed before its
    # first token shows 0, as its Hold was released.
    used_tokens: int | None = None


async def end_within(session: AsyncSession, end: RunEnd, now: datetime) -> bool:
    """Write the Run's end in the caller's transaction (the one that ends its work row)."""
    growth = end.growth
    values: dict[str, Any] = dict(status=end.status, error=as_json(end.error), finished_at=now, **growth.values())
    if end.used_tokens is not None:
        values["used_tokens"] = end.used_tokens
    if end.activations is not None:
        values["activations_expire_at"] = now + ACTIVATIONS_KEPT
    ended = await changed_one(session, update(PlaygroundRun).where(*_this_attempt(growth.run_id, growth.attempt))
                           .values(**values), commit=False)
    if ended and end.activations is not None:
        await session.exec(delete(PlaygroundActivations).where(col(PlaygroundActivations.run_id) == growth.run_id))
        session.add(PlaygroundActivations(run_id=growth.run_id, data=as_json(end.activations) or "{}"))
    return ended


async def fail_growing_within(session: AsyncSession, work_id: uuid.UUID, error: dict[str, Any],
                              now: datetime) -> bool:
    """The Run of a work row that the platform failed to run, or whose Runner died: `failed`,
    keeping the text it saved, with `used_tokens` 0 since its Hold is released and it costs
    nothing. Called only while the work row is still that attempt's, so it holds also when the
    attempt failed before it started the Run."""
    return await changed_one(session, update(PlaygroundRun).where(
        col(PlaygroundRun.work_id) == work_id, col(PlaygroundRun.status).in_(RUN_GROWING),
        col(PlaygroundRun.deleted_at).is_(None),
    ).values(status=RunStatus.failed, used_tokens=0, error=as_json(error), finished_at=now), commit=False)


async def fail_queued_within(session: AsyncSession, work_id: uuid.UUID, error: dict[str, Any],
                             now: datetime) -> uuid.UUID | None:
    """The Run of a queued work row that never runs (its User was suspended): `failed`, without
    text, with the error object; its id, or None when it no longer grew. A Run still `running`
    here was cut by a restart and reads as queued: it fails the same way."""
    run_id = (await session.exec(select(PlaygroundRun.id).where(PlaygroundRun.work_id == work_id))).first()
    failed = await changed_one(session, update(PlaygroundRun).where(
        col(PlaygroundRun.work_id) == work_id, col(PlaygroundRun.status).in_(RUN_GROWING),
        col(PlaygroundRun.deleted_at).is_(None),
    ).values(status=RunStatus.failed, choices="[]", usage=None, used_tokens=0, completion_id="",
             error=as_json(error), finished_at=now), commit=False)
    return run_id if failed else None


# -- reads -------------------------------------------------------------------------------------------


def _restarted(run: PlaygroundRun, work_status: WorkStatus | None) -> bool:
    return run.status in RUN_GROWING and work_status == WorkStatus.queued


def effective(run: PlaygroundRun, work_status: WorkStatus | None) -> PlaygroundRun:
    """A Run whose work row went back to `queued` (a planned restart) reads as queued, without
    text: it runs again from the beginning."""
    if _restarted(run, work_status):
        run.status, run.choices, run.usage, run.used_tokens, run.completion_id = RunStatus.queued, "[]", None, 0, ""
    return run


def _live(user_id: uuid.UUID):
    return col(PlaygroundRun.user_id) == user_id, col(PlaygroundRun.deleted_at).is_(None)


async def _runs(session: AsyncSession, query: Any) -> list[PlaygroundRun]:
    """The Runs that `query` (of PlaygroundRun and its Work's status) finds, as reads show them,
    readable after the transaction ends."""
    rows = (await session.exec(query)).all()
    runs = []
    for run, work_status in rows:
        session.expunge(run)
        runs.append(effective(run, work_status))
    await session.rollback()
    return runs


def _with_work_status():
    return (select(PlaygroundRun, Work.status)
            .outerjoin(Work, col(Work.id) == col(PlaygroundRun.work_id)))


async def read(session: AsyncSession, run_id: uuid.UUID, user_id: uuid.UUID) -> PlaygroundRun:
    """One of the User's Runs; RunNotFound for another User's, a deleted one, or none."""
    found = await _runs(session, _with_work_status().where(col(PlaygroundRun.id) == run_id, *_live(user_id)))
    if not found:
        raise RunNotFound(NOT_FOUND.format(run_id=run_id))
    return found[0]


async def listing(session: AsyncSession, user_id: uuid.UUID, limit: int = NEWEST) -> list[PlaygroundRun]:
    """The User's newest `limit` Runs, newest first, and after them the rest of each group that
    the limit cut (also newest first)."""
    newest = await _runs(session, _with_work_status().where(*_live(user_id))
                         .order_by(col(PlaygroundRun.number).desc()).limit(limit))
    cut_groups = {run.group_id for run in newest if run.group_id is not None}
    if len(newest) < limit or not cut_groups:
        return newest
    shown = {run.id for run in newest}
    rest = await _runs(session, _with_work_status().where(
        *_live(user_id), col(PlaygroundRun.group_id).in_(cut_groups), col(PlaygroundRun.id).not_in(shown))
        .order_by(col(PlaygroundRun.number).desc()))
    return newest + rest


async def present(session: AsyncSession, user_id: uuid.UUID, run_ids: list[uuid.UUID]) -> list[PlaygroundRun]:
    """The User's Runs of `run_ids` that are there (not deleted), oldest first."""
    return await _runs(session, _with_work_status().where(col(PlaygroundRun.id).in_(run_ids), *_live(user_id))
                       .order_by(col(PlaygroundRun.number)))


async def by_ids(session: AsyncSession, user_id: uuid.UUID, run_ids: list[uuid.UUID]) -> list[PlaygroundRun]:
    """The User's Runs of `run_ids`, oldest first; RunNotFound names the first id that none is."""
    found = await present(session, user_id, run_ids)
    missing = [run_id for run_id in run_ids if run_id not in {run.id for run in found}]
    if missing:
        raise RunNotFound(NOT_FOUND.format(run_id=missing[0]))
    return found


async def every(session: AsyncSession, user_id: uuid.UUID) -> list[PlaygroundRun]:
    """Every Run that the User kept, oldest first."""
    return await _runs(session, _with_work_status().where(*_live(user_id)).order_by(col(PlaygroundRun.number)))


async def growing_ids(session: AsyncSession, user_id: uuid.UUID) -> list[uuid.UUID]:
    """The User's Runs that are queued or running, oldest first."""
    ids = list((await session.exec(select(PlaygroundRun.id).where(
        *_live(user_id), col(PlaygroundRun.status).in_(RUN_GROWING)).order_by(col(PlaygroundRun.number)))).all())
    await session.rollback()
    return ids


async def group_ids(session: AsyncSession, user_id: uuid.UUID, group_id: uuid.UUID) -> list[uuid.UUID]:
    """The ids of a group's Runs that the User kept; RunNotFound when there are none."""
    ids = list((await session.exec(select(PlaygroundRun.id).where(
        *_live(user_id), col(PlaygroundRun.group_id) == group_id).order_by(col(PlaygroundRun.number)))).all())
    await session.rollback()
    if not ids:
        raise RunNotFound(GROUP_NOT_FOUND.format(group_id=group_id))
    return ids


async def activations(session: AsyncSession, run_id: uuid.UUID, user_id: uuid.UUID,
                      now: datetime) -> str | None:
    """The Run's Activations as the API answered them (JSON text), while they are kept; None when it
    read none or they expired. RunNotFound as `read`."""
    run = await read(session, run_id, user_id)
    if run.activations_expire_at is None or run.activations_expire_at <= now:
        return None
    data = (await session.exec(select(PlaygroundActivations.data)
                                .where(PlaygroundActivations.run_id == run_id))).first()
    await session.rollback()
    return data


# -- the User's changes --------------------------------------------------------------------------------


async def stop(session: AsyncSession, run_ids: list[uuid.UUID], user_id: uuid.UUID, now: datetime,
               kept_for: timedelta) -> list[PlaygroundRun]:
    """Stop each of the Runs that is queued or running: it becomes `stopped`. A running one keeps
    the text it saved and pays for its tokens so far, as a stream that you close; a queued one
    (or one that a restart put back) held nothing and keeps no text. An ended Run stays as it is.
    Commits; the Runs as they are now, oldest first (RunNotFound as `by_ids`)."""
    await _stop_within(session, run_ids, user_id, now, kept_for)
    await session.commit()
    return await by_ids(session, user_id, run_ids)


async def _stop_within(session: AsyncSession, run_ids: list[uuid.UUID], user_id: uuid.UUID, now: datetime,
                       kept_for: timedelta) -> None:
    # In the order of their ids, as `progress_all` writes them: a group's stop and the writes of
    # its growing Runs then never hold a lock that the other waits for.
    for run_id in sorted(run_ids):
        found = await session.get(PlaygroundRun, run_id)
        if found is None or found.user_id != user_id or found.deleted_at is not None:
            raise RunNotFound(NOT_FOUND.format(run_id=run_id))
        # The work row first, as `queue.finish` locks it before it writes the Run's end.
        work = await session.get(Work, found.work_id, with_for_update=True, populate_existing=True)
        run = await session.get(PlaygroundRun, run_id, with_for_update=True, populate_existing=True)
        assert run is not None, f"the Run {run_id} has no row"  # only erase_kept removes Runs, deleted ones
        if run.status not in RUN_GROWING:  # it ended meanwhile: its end stands
            continue
        running = run.status == RunStatus.running and work is not None and work.status == WorkStatus.running
        run.status, run.finished_at = RunStatus.stopped, now
        if not running:  # queued, or put back by a restart: what it grew is gone
            run.choices, run.usage, run.used_tokens, run.completion_id = "[]", None, 0, ""
        session.add(run)
        if work is not None and work.status not in ENDED:
            paid = queue.HoldEnd(run.used_tokens, Counting.partial, UsageStatus.stopped)
            await queue.cancel(session, work.id, user_id, WorkKind.run, now, kept_for,
                               running_end=paid if running else queue.RELEASE, commit=False)


async def delete_run(session: AsyncSession, run_id: uuid.UUID, user_id: uuid.UUID, now: datetime,
                     kept_for: timedelta) -> PlaygroundRun:
    """Gone for the User at once: a Run that grows stops first (and pays for what it used), then
    it is marked deleted; the Runner's housekeeping erases it 14 days later. Commits."""
    run = await read(session, run_id, user_id)
    await _stop_within(session, [run_id], user_id, now, kept_for)
    await session.exec(update(PlaygroundRun).where(col(PlaygroundRun.id) == run_id).values(deleted_at=now))
    await session.commit()
    return run


# -- Kept data -----------------------------------------------------------------------------------------


async def erase_kept(session: AsyncSession, now: datetime) -> int:
    """The Runner's housekeeping: drop the Activations kept 7 days after their Run ended, and erase
    the Runs deleted more than 14 days ago, with their Activations and their work rows. The number
    of rows that went."""
    expired = select(PlaygroundRun.id).where(col(PlaygroundRun.activations_expire_at) < now)
    gone = (await session.exec(delete(PlaygroundActivations).where(col(PlaygroundActivations.run_id).in_(expired)))
            ).rowcount
    before = now - KEPT_AFTER_DELETE
    erased = list((await session.exec(select(PlaygroundRun.id, PlaygroundRun.work_id)
                                      .where(col(PlaygroundRun.deleted_at) < before))).all())
    if erased:
        run_ids, work_ids = [run_id for run_id, _ in erased], [work_id for _, work_id in erased]
        await session.exec(delete(PlaygroundActivations).where(col(PlaygroundActivations.run_id).in_(run_ids)))
        await session.exec(delete(PlaygroundRun).where(col(PlaygroundRun.id).in_(run_ids)))
        await session.exec(delete(Work).where(col(Work.id).in_(work_ids), col(Work.kind) == WorkKind.run))
    await session.commit()
    return gone + len(erased)
