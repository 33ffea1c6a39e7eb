"""How the Runner runs one harvest: its Hold, then its GPU run in the Ray
cluster (`harvest/run.py`), followed until it ends.

The run is a detached actor named after the harvest, so it outlives this
process: after a planned stop or a crash the row goes back to `pending` with
its Hold released, and the next attempt takes a new Hold and follows the same
run, never a second one. A done harvest pays what the run read, up to its
Hold; a failure pays nothing; a cancel is `ledger.work.harvests.cancel`'s.
"""
from __future__ import annotations

import asyncio
import json
import logging
import uuid
from datetime import datetime, timezone
from typing import Any, Callable, Protocol

from domain import errors
from domain.harvests.validation import decode_projection
from deployments.background.kinds import AttemptHold, WorkLost
from ledger.work import harvests as records
from ledger.work import queue as queue
from ledger.tokens.tables import Counting, UsageSource, UsageStatus
from ledger.work.tables import Harvest, Work, WorkKind, WorkStatus
from ledger.store.survive import survive

log = logging.getLogger("acs.harvests")

NOT_STARTED = "Inference did not start the harvest: {why}. It does not count toward your harvests of the month."
TOKENS_SHORT = ("When the harvest started, your tokens could no longer hold its prompts. "
                "Ask for more tokens, or submit fewer prompts.")
UNAUTHENTICATED = ("The API key was revoked, or your access was suspended, before the harvest started. "
                   "Submit it with a key that works.")
LOST = "Inference no longer had the result of the GPU run. Submit it again."
FAILED = "The API failed to run this harvest. Report it with the harvest's job_id."


class Run(Protocol):
    async def status(self) -> Any: ...

    async def cancel(self) -> None: ...


class Runs(Protocol):
    """Where GPU runs live (the Ray cluster; a fake in unit tests)."""

    async def start(self, name: str, make_spec: Callable[[], Any]) -> Run:
        """The run `name`, started with `make_spec()` unless it runs already."""
        ...

    async def find(self, name: str) -> Run | None:
        """The run `name` when it still exists."""
        ...

    async def live(self) -> list[str]:
        """The names of the runs that still exist."""
        ...

    async def close(self, name: str) -> None:
        """End the run `name` now (one that still runs stops first); nothing when it is gone."""
        ...


def run_name(work: Work) -> str:
    """The run's name in the Ray cluster (harvest.run.run_name's, without importing Ray here)."""
    return f"harvest-{work.id}"


def job_of(name: str) -> uuid.UUID | None:
    """The harvest whose run is `name` (run_name's inverse); None for a name of no run."""
    try:
        return uuid.UUID(name.removeprefix("harvest-"))
    except ValueError:
        return None


def failed(message: str, code: str | None = None) -> queue.Result:
    body = {"tokens": 0, "error": message, **({"code": code} if code else {})}
    return queue.Result(WorkStatus.failed, 200, json.dumps(body))


class HarvestHandler:
    kind = WorkKind.harvest
    kept_for = records.KEPT_FOR

    def __init__(self, services: Any, runs: Runs, poll_s: float = 1.0) -> None:
        """`runs`: RayRuns, given by the composition root (a fake in unit tests)."""
        self.services, self.ledger = services, services.ledger
        self.runs = runs
        self.poll_s = poll_s

    async def run(self, work: Work, hold: AttemptHold) -> queue.Result:
        async with self.ledger.sessions() as session:
            harvest = await records.load(session, work.id)
        try:
            held = await self.ledger.hold(records.hold_ask(
                work.user_id, work.key_id, work.model_id, harvest.reserved_tokens, work.request_id))
        except errors.BudgetExceeded:
            return failed(TOKENS_SHORT)
        try:
            await hold.attach(held.hold_id)
        except BaseException:
            await self.ledger.end(held.hold_id, None, None, UsageStatus.failed)
            raise
        run = await self._start_or_follow(work, harvest)
        if run is None:
            return failed(LOST)
        status = await self._follow(work, run)
        if status is None:
            return failed(LOST)
        if status.state != "done":
            return failed(status.error or FAILED)
        result = dict(status.result)
        used = min(int(result.pop("tokens_read")), held.tokens)
        await hold.end(held.hold_id, used, Counting.reported, UsageStatus.completed)
        # A harvest reads prompts and generates nothing: all its tokens go in.
        self.services.counts.count_settled_tokens(work.model_id, UsageSource.harvest.value, used, used)
        return queue.Result(WorkStatus.succeeded, 200, json.dumps({"tokens": used, "result": result}))

    # -- the GPU run ----------------------------------------------------------------------------------

    async def _start_or_follow(self, work: Work, harvest: Harvest) -> Run | None:
        """The harvest's run: a new one, or the one an earlier attempt started.

        The name is written before the run starts, so a crash in between
        leaves a name whose run either runs (followed) or never read a
        prompt on a GPU (started now). A run that read on a GPU and is gone
        took its result with it.
        """
        name = run_name(work)
        if harvest.run_name:
            found = await self.runs.find(name)
            if found is not None or harvest.gpu_started_at is not None:
                return found
        await self._record(work, run_name=name)
        return await self.runs.start(name, lambda: self._spec(work))

    def _spec(self, work: Work) -> Any:
        from harvest.run import RunSpec

        request, settings = json.loads(work.request), self.services.settings
        model = self.services.catalog.models[work.model_id]
        projection = request.get("project_onto")
        return RunSpec(
            job_id=str(work.id), model=model.model_dump(by_alias=True), prompts=request["prompts"],
            layers=request["layers"], shard_size=request["shard_size"], batch_size=request.get("batch_size"),
            add_special_tokens=request["add_special_tokens"],
            directions=None if projection is None else decode_projection(projection),
            storage_root=settings.harvest_storage, time_limit_s=model.harvest_time_limit_s,
        )

    async def _follow(self, work: Work, run: Run) -> Any | None:
        """Poll the run to its end, writing its progress; None when the run is gone."""
        try:
            while True:
                status = await run.status()
                await self._record(work, prompts_done=status.prompts_done, gpu_started_at=_at(status.gpu_started_at))
                if status.state in ("done", "failed"):
                    return status
                await asyncio.sleep(self.poll_s)
        except (asyncio.CancelledError, WorkLost):
            # A task of its own: the Runner may cancel this attempt more than once.
            await survive(self._stop_if_cancelled(work, run))
            raise  # a planned stop or a lost lease: the run goes on, and is followed again
        except Exception:  # noqa: BLE001 - a run that died with its actor
            log.exception("harvest %s lost its run", work.id)
            return None

    async def _record(self, work: Work, **values: Any) -> None:
        async with self.ledger.write_sessions() as session:
            if not await records.record_run(session, work.id, self.ledger.owner, **values):
                raise WorkLost(str(work.id))

    async def _stop_if_cancelled(self, work: Work, run: Run) -> None:
        """The User cancelled the harvest: stop its GPU run too."""
        async with self.ledger.sessions() as session:
            status = (await session.get(Work, work.id)).status
            await session.rollback()
        if status == WorkStatus.cancelled:
            await run.cancel()

    # -- the Runner's other results ---------------------------------------------------------------------

    def failed(self, work: Work) -> queue.Result:
        return failed(FAILED)

    def refused(self, unusable: queue.Unusable) -> queue.Result:
        """A revoked key's or a suspended User's pending harvest: `unauthenticated`, costing nothing."""
        return failed(UNAUTHENTICATED, code="unauthenticated")


def _at(timestamp: float | None) -> datetime | None:
    return None if timestamp is None else datetime.fromtimestamp(timestamp, tz=timezone.utc)


class RayRuns:
    """GPU runs as detached actors of the Ray cluster (`harvest.run`)."""

    async def start(self, name: str, make_spec: Callable[[], Any]) -> Run:
        from harvest.run import start_run

        return _ActorRun(await asyncio.to_thread(start_run, make_spec()))

    async def find(self, name: str) -> Run | None:
        from harvest.run import find_run

        actor = await asyncio.to_thread(find_run, name.removeprefix("harvest-"))
        return None if actor is None else _ActorRun(actor)

    async def live(self) -> list[str]:
        # Imported in the thread too: a Runner without Ray (the tests') does not stall its loop on it.
        return await asyncio.to_thread(_live_runs)

    async def close(self, name: str) -> None:
        from harvest.run import close_run

        await asyncio.to_thread(close_run, name.removeprefix("harvest-"))


def _live_runs() -> list[str]:
    from harvest.run import live_runs

    return live_runs()


class _ActorRun:
    def __init__(self, actor: Any) -> None:
        self.actor = actor

    async def status(self) -> Any:
        return await self.actor.status.remote()

    async def cancel(self) -> None:
        await self.actor.cancel.remote()

