"""The platform's own operations, run beside the background Runner in its replica.

The Runner deployment has one replica in a cluster, so these run once:

- the spend sampler: every `spend_sample_s` it counts each model's replicas in
  Ray Serve, records what their GPUs cost over that span, and pauses new GPU
  work when the spend that the pause counts reaches `spend_pause_usd` (only an
  admin's Clear lifts the pause: `ledger/tokens/spend.py`); as that count crosses a
  warn amount, it mails the team once (`ledger/tokens/spend_warnings.py`);
- the floor keeper: while a warm window of a model is on and the spend stop is
  off, it keeps one `keep_warm` call open on the model's Serve handle. Serve's
  autoscaler counts that call as an ongoing request, so the model keeps a floor
  of one replica, and a model at zero starts. When the window ends, the call is
  cancelled and the model scales down after its idle window as usual.

Each piece takes its clock, its replica counts and its handles from the caller,
so tests drive them with a clock of their own and fakes at the Serve boundary.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Awaitable, Callable

from deployments.catalog import Catalog
from ledger.accounts.team_mail import TeamMail
from ledger.tokens import spend
from ledger.tokens import spend_warnings
from ledger.tokens import warm
from ledger.store.coltypes import utcnow

log = logging.getLogger("acs.operations")

# One keep_warm call lasts this long, and the next follows at once while the window is on:
# a replica that restarts meanwhile ends one call, not the floor.
KEEP_WARM_S = 300.0
# How soon a window's start or end, or a change of the stop, reaches the floor.
FLOOR_CHECK_S = 15.0
# After a failed keep_warm call (its replica went away), the next one waits this long.
KEEP_WARM_RETRY_S = 5.0
# A tick that comes late counts the time since the last one, but never more than this
# many spans: a Runner that was away long did not see what ran meanwhile.
MOST_SPANS_A_SAMPLE = 5

Clock = Callable[[], datetime]
# The replicas of each model that Serve lists now: model id -> count.
CountReplicas = Callable[[list[str]], Awaitable[dict[str, int]]]


@dataclass(frozen=True)
class Price:
    """What one model's replicas cost: the GPUs of one, and an hour of one GPU."""

    gpus_per_replica: float
    gpu_hour_usd: float


def prices_of(catalog: Catalog) -> dict[str, Price]:
    return {model_id: Price(spec.gpus_per_replica, spec.gpu_hour_usd) for model_id, spec in catalog.models.items()}


# -- the spend ----------------------------------------------------------------------------------------------

class SpendSampler:
    def __init__(self, sessions: Any, prices: dict[str, Price], count_replicas: CountReplicas, *,
                 pause_usd: float, sample_s: float, warn_usd: tuple[float, ...] = (),
                 team: TeamMail | None = None) -> None:
        self.sessions, self.prices, self.count_replicas = sessions, prices, count_replicas
        self.pause_usd, self.sample_s = pause_usd, sample_s
        self.warn_usd, self.team = warn_usd, team
        self._last_at: datetime | None = None

    async def tick(self, now: datetime) -> None:
        """Record what the replicas that run now cost since the last tick; pause at the stop amount."""
        counts = await self.count_replicas(list(self.prices))
        seconds = self._span(now)
        samples = [spend.Sample(model_id, counts.get(model_id, 0), price.gpus_per_replica, price.gpu_hour_usd,
                                seconds) for model_id, price in self.prices.items()]
        async with self.sessions() as session:
            await spend.record_samples(session, samples, now)
        self._last_at = now
        async with self.sessions() as session:
            counted = await spend.counted_since_clear(session, now)
        await self.warn_if_past(now, counted)
        await self.pause_if_past(now, counted)

    async def warn_if_past(self, now: datetime, counted: float) -> list[float]:
        """The warn amounts that `counted` crossed now, each mailed to the team once per crossing."""
        if not self.warn_usd:
            return []
        async with self.sessions() as session:
            crossed = await spend_warnings.warn_past(session, self.warn_usd, counted, self.pause_usd, self.team, now)
        for amount in crossed:
            log.warning("the GPUs cost $%.2f since the last Clear within 24 hours, past the warn amount $%.2f",
                        counted, amount)
        return crossed

    async def pause_if_past(self, now: datetime, counted: float | None = None) -> bool:
        """True when this call paused new GPU work."""
        if counted is None:
            async with self.sessions() as session:
                counted = await spend.counted_since_clear(session, now)
        if counted < self.pause_usd:
            return False
        async with self.sessions() as session:
            paused = await spend.pause_at(session, self.pause_usd, now, counted=counted)
        if paused:
            log.warning("new GPU work paused: the GPUs cost $%.2f since the last Clear within 24 hours", counted)
        return paused

    def _span(self, now: datetime) -> float:
        if self._last_at is None:
            return self.sample_s  # the first count stands for the span before it
        since = (now - self._last_at).total_seconds()
        return max(0.0, min(since, MOST_SPANS_A_SAMPLE * self.sample_s))


@dataclass(frozen=True)
class DeploymentRef:
    """The deployment whose replicas hold a model, as a handle names it: a colocated model's
    is the ingress's own (deployments/catalog.py, `colocate`)."""

    app_name: str
    deployment_name: str


def serve_replica_counter(handles: dict[str, Any]) -> CountReplicas:
    """Counts each model's replicas from Serve's details, through its handle's deployment
    (a handle or a DeploymentRef)."""
    async def count(model_ids: list[str]) -> dict[str, int]:
        return await asyncio.to_thread(_count_from_serve, handles, model_ids)
    return count


def _count_from_serve(handles: dict[str, Any], model_ids: list[str]) -> dict[str, int]:
    from deployments.replica_states import serve_replicas

    counts = {}
    for model_id in model_ids:
        handle = handles[model_id]
        replicas = serve_replicas(handle.app_name, handle.deployment_name)
        if replicas is None:
            # No count is better than a count of nothing: "when the platform last counted" shows the gap.
            raise RuntimeError(f"Serve does not list the deployment of {model_id}")
        counts[model_id] = holding_gpus(replicas)
    return counts


def holding_gpus(replicas: list[dict[str, Any]]) -> int:
    """The replicas (Serve's details of each) that hold their GPUs: each one with an actor, from
    its constructor's start (it loads the weights on them) until it has STOPPED. A replica without
    an actor waits for Ray to find the GPUs, and no container runs for it yet."""
    return sum(1 for replica in replicas if replica.get("actor_id") and replica.get("state") != "STOPPED")


# -- the floor of a warm window -------------------------------------------------------------------------

class FloorKeeper:
    """One open keep_warm call per model that a window keeps Warm now, and none for the others."""

    def __init__(self, sessions: Any, handles: dict[str, Any], keep_warm_s: float = KEEP_WARM_S,
                 retry_s: float = KEEP_WARM_RETRY_S) -> None:
        self.sessions, self.handles = sessions, handles
        self.keep_warm_s, self.retry_s = keep_warm_s, retry_s
        self.kept: dict[str, asyncio.Task] = {}

    async def tick(self, now: datetime) -> None:
        async with self.sessions() as session:
            wanted = await warm.warm_models(session, now) & set(self.handles)
        for model_id in [model_id for model_id in self.kept if model_id not in wanted]:
            await _cancel([self.kept.pop(model_id)])
            log.info("warm window of %s ended: its floor is released", model_id)
        for model_id in sorted(wanted - set(self.kept)):
            self.kept[model_id] = asyncio.create_task(self._keep(model_id), name=f"keep-warm-{model_id}")
            log.info("warm window of %s is on: it keeps one replica", model_id)

    async def stop(self) -> None:
        await _cancel(list(self.kept.values()))
        self.kept.clear()

    async def _keep(self, model_id: str) -> None:
        # One call after the other for as long as the window is on: the floor has no gap.
        while True:
            response = self.handles[model_id].keep_warm.remote(self.keep_warm_s)
            try:
                await response
            except asyncio.CancelledError:
                response.cancel()  # the replica's call ends too: nothing holds the floor
                raise
            except Exception:  # noqa: BLE001 - a replica that went away: the next call starts another
                log.exception("keep_warm on %s failed", model_id)
                await asyncio.sleep(self.retry_s)


# -- the loops in the Runner's replica ----------------------------------------------------------------------

class Operations:
    def __init__(self, sampler: SpendSampler, keeper: FloorKeeper, *, clock: Clock = utcnow,
                 floor_check_s: float = FLOOR_CHECK_S) -> None:
        self.sampler, self.keeper, self.clock = sampler, keeper, clock
        self.floor_check_s = floor_check_s
        self._loops: list[asyncio.Task] = []

    def start(self) -> None:
        self._loops = [asyncio.create_task(self._every(self.sampler.sample_s, self.sampler.tick), name="spend"),
                       asyncio.create_task(self._every(self.floor_check_s, self.keeper.tick), name="floor")]

    def check_alive(self) -> None:
        ended = [task for task in self._loops if task.done()]
        if ended:
            raise RuntimeError(f"{len(ended)} loops of the operations ended: {ended[0]}")

    async def stop(self) -> None:
        await _cancel(self._loops)
        await self.keeper.stop()

    async def _every(self, seconds: float, tick: Callable[[datetime], Awaitable[Any]]) -> None:
        while True:
            try:
                await tick(self.clock())
            except Exception:  # noqa: BLE001 - the database or Serve can fail; the loop must not
                log.exception("an operations tick failed")
            await asyncio.sleep(seconds)


def build_operations(sessions: Any, catalog: Catalog, handles: dict[str, Any], *, pause_usd: float,
                     sample_s: float, count_replicas: CountReplicas | None = None,
                     clock: Clock = utcnow, warn_usd: tuple[float, ...] = (),
                     team: TeamMail | None = None) -> Operations:
    """`sessions` write to the ledger (the pause locks the stop's row); the replicas are
    counted from Serve unless the caller counts them. `team` gets the warn amounts' mail."""
    counter = count_replicas or serve_replica_counter(handles)
    sampler = SpendSampler(sessions, prices_of(catalog), counter, pause_usd=pause_usd, sample_s=sample_s,
                           warn_usd=warn_usd, team=team)
    return Operations(sampler, FloorKeeper(sessions, handles), clock=clock)


async def _cancel(tasks: list[asyncio.Task]) -> None:
    for task in tasks:
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.gather(*tasks, return_exceptions=True)
