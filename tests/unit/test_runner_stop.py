"""A planned stop whose grace ends while an attempt writes its result (deployments/background/runner.py,
`Runner.stop`): the write is not cut, and the stop waits for it. The moment is chosen, not slept for: a
session of the test locks the Job's row, so the attempt's final write (`queue.finish`, which locks the
row first) waits on the lock while the grace ends; the lock is let go once the stop has cut the
attempts. The rest of the planned stop is in test_jobs.py (`test_a_planned_stop_...`)."""
from __future__ import annotations

import asyncio
import uuid
from datetime import datetime

import pytest
from sqlalchemy import text
from sqlmodel import select

from ledger.store.coltypes import utcnow
from ledger.tokens.tables import HoldState
from ledger.work.tables import WorkKind, WorkQueue
from tests.unit.test_jobs import SKY, Jobs, jobs  # noqa: F401 - jobs: the fixture
from tests.waiting import wait_until

pytestmark = pytest.mark.postgres


@pytest.mark.fake(delay_s=0.05)
async def test_a_result_being_written_when_the_grace_ends_is_written_and_charged(jobs: Jobs) -> None:
    started = utcnow()
    # A long lease, renewed each 15 s: after its first renewal none (it writes the rows too) comes
    # while the row is locked.
    runner = jobs.runner(runner_grace_s=0.05, runner_lease_s=60.0)
    await wait_until(lambda: _renewed_since(jobs, started))
    job = (await jobs.submit({**SKY, "max_tokens": 20})).json()
    await jobs.wait(job["id"], "running")
    await wait_until(lambda: _hold_recorded(jobs))  # the attempt writes its row no more until its end
    async with jobs.stack.services.ledger.write_sessions() as locker:
        await locker.execute(text("SELECT id FROM work WHERE id = :id FOR UPDATE").bindparams(id=uuid.UUID(job["id"])))
        me = (await locker.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        # The engine ends the request; the attempt's write then waits for the lock.
        await wait_until(lambda: _blocked_by(jobs, me), timeout_s=10)
        stop = asyncio.create_task(runner.stop())
        await wait_until(lambda: not runner.attempts)  # the grace ended, the attempt was cut
        assert not stop.done()  # the stop waits for the result's write
        await locker.rollback()
    await asyncio.wait_for(stop, 10)
    jobs.runners.remove(runner)

    done = (await jobs.get(job["id"])).json()
    assert (done["status"], done["usage_pending"]) == ("succeeded", False)
    (hold,) = await jobs.holds(job["request_id"])
    assert (hold.state, hold.used) == (HoldState.settled, 4 + 20)
    result = await jobs.get(job["id"], "/result")
    assert result.status_code == 200 and result.json()["usage"]["completion_tokens"] == 20, result.text


async def _renewed_since(jobs: Jobs, started: datetime) -> bool:
    """The Runner's watch renewed its leases and then checked in (`Runner._renew`)."""
    async with jobs.stack.services.sessions() as session:
        polled_at = (await session.exec(select(WorkQueue.polled_at).where(WorkQueue.kind == WorkKind.job))).one()
    return polled_at is not None and polled_at >= started


async def _hold_recorded(jobs: Jobs) -> bool:
    (row,) = await jobs.rows()
    return row.hold_id is not None


async def _blocked_by(jobs: Jobs, pid: int) -> bool:
    """Another backend waits on a lock that `pid`'s session holds."""
    async with jobs.stack.services.sessions() as session:
        waiting = (await session.execute(text("SELECT count(*) FROM pg_stat_activity WHERE :pid = ANY(pg_blocking_pids(pid))")
                                      .bindparams(pid=pid))).scalar_one()
    return waiting > 0
