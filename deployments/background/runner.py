"""The Runner: runs background work from the ledger's queues (`ledger/work/queue.py`).

One Runner per process; several processes (Serve replicas) may run at once.
Each kind of work has a handler (`kinds.WorkHandler`) that the composition
root registers; the Runner knows no kind. It keeps nothing a restart would lose:

- a poll loop reads every kind's queue in one read, and wakes the claim loop of
  each kind with queued work, which takes the next runnable rows when the kind's
  cap allows (one read a poll, not one per kind: on 2 cores each read is taken
  from the engine); the routes that queue work wake a kind at once (`wake`), so
  the poll is only the fallback for work that no one announced;
- a watch loop renews this process's leases, stops the attempts whose rows
  changed (a cancel, a lease that lapsed), queues again (or fails, by their
  kind's queue row) the rows of Runners that died, and ends queued rows of
  revoked keys and suspended Users;
- every `housekeeping_s` it drops what expired: the bodies of ended rows'
  results, the Idempotency-Keys of more than 24 hours, deleted Looms and
  Playground Runs after 14 days and the Runs' Activations after 7, and sends
  the App's mail that the SMTP server refused;
- `stop()` is the planned stop: running work gets a grace period, then goes
  back to `queued` with its Hold released, so the cut request costs nothing;
  a result already being written when the grace ends is written to its end.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Awaitable, Callable, Sequence

from deployments.background.doorbell import Doorbell
from deployments.background.kinds import AttemptHold, WorkHandler, WorkLost
from deployments.background.protocols import Settlement
from ledger.work import queue as queue
from ledger.store.coltypes import utcnow
from ledger.work.idempotency import purge_expired
from ledger.work.looms import erase_deleted
from ledger.work.runs import erase_kept
from ledger.accounts.mail import Mailer, deliver_pending
from ledger.work.tables import Work, WorkKind
from ledger.store.survive import survive

log = logging.getLogger("acs.runner")
Housekeeper = Callable[[datetime], Awaitable[object]]


@dataclass(frozen=True)
class RunnerTimes:
    """How a Runner paces itself (the settings `ACS_RUNNER_*`)."""

    lease_s: float = 30.0  # its leases last this long; it renews them each quarter
    # How often one cheap read looks at every queue: the fallback for work that no nudge
    # (`wake`) announced. On 2 cores each read is taken from the engine.
    poll_s: float = 1.0
    # How often running work is checked for a stop (a cancel, a lost lease): it costs a read each time.
    watch_s: float = 0.25
    grace_s: float = 10.0  # a planned stop gives running work this long
    housekeeping_s: float = 600.0


class Runner:
    """`ledger` is the process's TokenLedger, as a `Settlement`: its sessions, its owner (one
    identity per process, for its work leases and its Holds), the Holds' leases and the spend stop.
    `doorbell` is where the routes of this process announce queued work (doorbell.py); without
    one, the Runner keeps its own, which only `wake` (its Serve replica's call) and its poll ring."""

    def __init__(self, ledger: Settlement, handlers: list[WorkHandler], model_ids: list[str],
                 times: RunnerTimes = RunnerTimes(), mailer: Mailer | None = None,
                 doorbell: Doorbell | None = None, housekeepers: Sequence[Housekeeper] = ()) -> None:
        self.ledger = ledger
        self.sessions = ledger.write_sessions
        self.owner = ledger.owner
        self.handlers = {handler.kind: handler for handler in handlers}
        self.model_ids = list(model_ids)
        self.lease_s, self.poll_s, self.grace_s = times.lease_s, times.poll_s, times.grace_s
        self.housekeeping_s = times.housekeeping_s
        self.watch_s = times.watch_s
        self.mailer = mailer  # the App's unsent mail goes out again at each housekeeping
        # What the layers above want done at each housekeeping too (the composition root names them):
        # each is called with the time, and one that fails is logged and leaves the others be.
        self.housekeepers = list(housekeepers)
        self.attempts: dict[uuid.UUID, asyncio.Task] = {}
        # The results being written: a planned stop's cut must not cancel them (`_write_result`).
        self._writing: set[asyncio.Future] = set()
        self._claim_loops: list[asyncio.Task] = []
        self.doorbell = doorbell or Doorbell()
        # Set when work of the kind was announced or the poll saw it queued.
        self._wanted = {kind: self.doorbell.event(kind) for kind in self.handlers}
        self._watch: list[asyncio.Task] = []
        self.stopping = False

    # -- start and stop -------------------------------------------------------------------------

    def start(self) -> None:
        self.ledger.leases.start()
        self._claim_loops = [asyncio.create_task(self._claim_loop(handler)) for handler in self.handlers.values()]
        self._claim_loops.append(asyncio.create_task(self._poll_loop()))
        self._watch = [asyncio.create_task(self._watch_loop())]

    @property
    def _loops(self) -> list[asyncio.Task]:
        return self._claim_loops + self._watch

    def check_alive(self) -> None:
        ended = [task for task in self._loops if task.done()]
        if ended and not self.stopping:
            raise RuntimeError(f"{len(ended)} loops of the Runner ended: {ended[0]}")

    async def stop(self) -> None:
        """The planned stop: no new claims; after the grace, running work goes back to `queued`."""
        self.stopping = True
        await _cancel(self._claim_loops)
        if self.attempts:
            await asyncio.wait(list(self.attempts.values()), timeout=self.grace_s)
        await _cancel(list(self.attempts.values()))
        # An attempt that ended within the grace may still be writing its result: that write is
        # not cut, and the stop waits for it, or the row would stay `running` until its lease lapsed.
        await asyncio.gather(*self._writing, return_exceptions=True)
        await _cancel(self._watch)
        await self.ledger.leases.stop()

    # -- the loops --------------------------------------------------------------------------------

    def wake(self, kind: WorkKind) -> None:
        """Work of `kind` was queued: claim it now, not at the next poll."""
        self.doorbell.ring(kind)

    async def _poll_loop(self) -> None:
        while True:
            try:
                kinds = await self._queued_kinds()
            except Exception:  # noqa: BLE001 - the database can fail; the loop must not
                log.exception("reading the queues failed")
                kinds = set()
            for kind in kinds:
                self.wake(kind)
            await asyncio.sleep(self.poll_s)

    async def _queued_kinds(self) -> set[WorkKind]:
        # While new GPU work is paused, queued work waits (the spec's Spend limit).
        if await self.ledger.spend_stopped():
            return set()
        async with self.ledger.sessions() as session:
            return await queue.queued_kinds(session, list(self.handlers), self.model_ids)

    async def _claim_loop(self, handler: WorkHandler) -> None:
        wanted = self._wanted[handler.kind]
        while True:
            await wanted.wait()
            wanted.clear()
            try:
                claimed = await self._claim(handler.kind)
            except Exception:  # noqa: BLE001 - the database can fail; the loop must not
                log.exception("claiming %s work failed", handler.kind.value)
                claimed = []
            if claimed:
                wanted.set()  # more may wait behind them: claim again at once
            for work in claimed:
                stale = self.attempts.get(work.id)
                if stale is not None:  # this Runner stalled past its own lease: that attempt is cut
                    stale.cancel()
                self.attempts[work.id] = asyncio.create_task(self._attempt(handler, work))

    async def _claim(self, kind: WorkKind) -> list[Work]:
        # While new GPU work is paused, queued work waits (the spec's Spend limit).
        if await self.ledger.spend_stopped():
            return []
        async with self.ledger.sessions() as session:
            if not await queue.any_queued(session, kind, self.model_ids):
                return []
        async with self.sessions() as session:
            return await queue.claim(session, kind, self.model_ids, self.owner, self.lease_s, utcnow())

    async def _watch_loop(self) -> None:
        renewed_at = kept_at = float("-inf")
        while True:
            try:
                if time.monotonic() - kept_at >= self.housekeeping_s:
                    kept_at = time.monotonic()
                    await self._housekeeping()
                if time.monotonic() - renewed_at >= self.lease_s / 4:
                    renewed_at = time.monotonic()
                    await self._renew()
                    await self._requeue_lapsed()
                    await self._end_unusable()
                elif self.attempts:
                    await self._stop_lost()
            except Exception:  # noqa: BLE001
                log.exception("watching background work failed")
            await asyncio.sleep(self.watch_s)

    # -- one attempt --------------------------------------------------------------------------------

    async def _attempt(self, handler: WorkHandler, work: Work) -> None:
        # The attempt stays listed until its result is written: a planned stop waits for it.
        hold = AttemptHold(self._recorder(work.id, work.attempts))
        try:
            try:
                result = await handler.run(work, hold)
            except WorkLost:
                return
            except asyncio.CancelledError:
                if self.stopping:
                    await survive(self._requeue_own(work.id))
                raise
            except Exception:  # noqa: BLE001 - the platform failed: the work fails, and never runs again
                log.exception("background work %s failed", work.id)
                result, hold.ending = handler.failed(work), queue.RELEASE
            await self._write_result(handler, work, result, hold.ending)
        finally:
            if self.attempts.get(work.id) is asyncio.current_task():  # not a later attempt's entry
                del self.attempts[work.id]
            self.wake(handler.kind)  # its place is free: queued work of the kind may start

    async def _write_result(self, handler: WorkHandler, work: Work, result: queue.Result,
                            ending: queue.HoldEnd) -> None:
        """The attempt's result and its Hold's end, written to the end even if the attempt is cancelled
        meanwhile (a planned stop's grace that ends during the write, a lost lease: `finish` then
        writes nothing); `stop` waits for the writes that it finds."""
        async def write() -> None:
            async with self.sessions() as session:
                if not await queue.finish(session, work.id, self.owner, result, ending, utcnow(),
                                          handler.kept_for, work.attempts):
                    log.info("background work %s ended elsewhere; its answer is dropped", work.id)

        writing = asyncio.ensure_future(write())
        self._writing.add(writing)
        writing.add_done_callback(self._writing.discard)
        await survive(writing)

    def _recorder(self, work_id: uuid.UUID, attempt: int) -> Callable[[uuid.UUID], Awaitable[bool]]:
        async def record(hold_id: uuid.UUID) -> bool:
            async with self.sessions() as session:
                return await queue.attach_hold(session, work_id, self.owner, hold_id, attempt)
        return record

    async def _requeue_own(self, work_id: uuid.UUID) -> None:
        async with self.sessions() as session:
            await queue.requeue(session, work_id, utcnow(), owner=self.owner)

    # -- what the watch loop does -----------------------------------------------------------------------

    async def _renew(self) -> None:
        known = set(self.attempts)
        async with self.sessions() as session:
            mine = await queue.renew(session, self.owner, utcnow() + timedelta(seconds=self.lease_s))
        self._cancel_lost(known - mine)
        async with self.sessions() as session:
            await queue.heartbeat(session, list(self.handlers), utcnow())

    async def _stop_lost(self) -> None:
        # Only the attempts known before the read: a claim that lands meanwhile is running.
        known = set(self.attempts)
        async with self.sessions() as session:
            mine = await queue.running_of(session, self.owner)
        self._cancel_lost(known - mine)

    def _cancel_lost(self, lost: set[uuid.UUID]) -> None:
        for work_id in lost:
            task = self.attempts.get(work_id)
            if task is not None:
                task.cancel()  # its request stops; the row's new state stands

    async def _requeue_lapsed(self) -> None:
        """Rows whose Runner died: each kind's queue row says whether they run again or fail
        (`queue.recover_lapsed`); a failure's result is the kind's handler's. This Runner's own
        rows whose attempt still runs here are not among them: their renewal came late (a loaded
        machine, a slow database), and the next one extends them."""
        now = utcnow()
        async with self.sessions() as session:
            lapsed = await queue.expired(session, now)
        for work in lapsed:
            if work.lease_owner == self.owner and work.id in self.attempts:
                continue
            handler = self.handlers.get(work.kind)
            failed = handler.failed if handler is not None else None
            kept_for = handler.kept_for if handler is not None else timedelta(0)
            async with self.sessions() as session:
                recovered = await queue.recover_lapsed(session, work.id, now, failed, kept_for)
            if recovered == queue.Recovered.requeued:
                log.warning("background work %s lost its Runner; it runs again", work.id)
            elif recovered == queue.Recovered.failed:
                log.warning("background work %s lost its Runner; it failed", work.id)

    async def _housekeeping(self) -> None:
        """What expires: results (the rows stay, a Job answers 410), Idempotency-Keys (24 hours),
        the Looms, Nodes and Playground Runs deleted 14 days ago and the Runs' Activations 7 days
        after their Run ended; and the App's mail that did not go out."""
        now = utcnow()
        async with self.sessions() as session:
            await queue.drop_expired_results(session, now)
        async with self.sessions() as session:
            await purge_expired(session, now)
        async with self.sessions() as session:
            await erase_deleted(session, now)
        async with self.sessions() as session:
            await erase_kept(session, now)
        await deliver_pending(self.sessions, self.mailer, now)
        for housekeeper in self.housekeepers:
            try:
                await housekeeper(now)
            except Exception:  # noqa: BLE001 - one chore's failure must not stop the Runner's loop
                log.exception("a housekeeping chore failed; it runs again at the next housekeeping")

    async def _end_unusable(self) -> None:
        for handler in self.handlers.values():
            async with self.sessions() as session:
                unusable = await queue.unusable_queued(session, handler.kind)
            for row in unusable:
                async with self.sessions() as session:
                    await queue.fail_queued(session, row.work_id, handler.refused(row), utcnow(), handler.kept_for)


async def _cancel(tasks: list[asyncio.Task]) -> None:
    for task in tasks:
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.gather(*tasks, return_exceptions=True)
