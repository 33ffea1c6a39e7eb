"""The GPU spend with a clock the tests move: minute samples from the replicas that
Serve lists and their price, the sums, the automatic pause at a limit set low for
the test, the Lock and the Clear with who made them, and the 429 spend_cap of the
API while new GPU work is paused."""
from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import pytest
from ray.serve._private.common import ReplicaState
from ray.serve.schema import ReplicaDetails

from cluster.composition import build_runner, compose
from deployments.catalog import load_catalog
from deployments.operations import SpendSampler, build_operations, holding_gpus, prices_of, serve_replica_counter
from deployments.resident import Background
from deployments.runner_server import RunnerServer
from ledger.tokens import spend
from ledger.tokens.tables import StopChangeKind
from tests.operations_fakes import Clock, FakeModelHandle, FakeReplicas, sessions  # noqa: F401 - sessions: the fixture
from tests.spec import assert_error

UTC = timezone.utc
GPU = load_catalog("gpu")
START = datetime(2026, 3, 2, 12, tzinfo=UTC)
# One minute of one replica of llama-405b: eight H200 at $4.54 an hour.
MINUTE_405B = 8 * 4.54 / 60
MINUTE_8B = 1.95 / 60


def sampler(sessions: Any, replicas: FakeReplicas, pause_usd: float = 3000.0) -> SpendSampler:
    return SpendSampler(sessions, prices_of(GPU), replicas, pause_usd=pause_usd, sample_s=60.0)


async def stop_now(sessions: Any) -> Any:
    async with sessions() as session:
        return await spend.spend_stop(session)


async def changes(sessions: Any) -> list[tuple[str, str, str, float | None]]:
    async with sessions() as session:
        return [(c.kind.value, c.by, c.reason, c.usd) for c in await spend.changes(session)]


async def counted(sessions: Any, now: datetime) -> float:
    async with sessions() as session:
        return await spend.counted_since_clear(session, now)


# -- samples ---------------------------------------------------------------------------------------------

async def test_each_minute_records_the_replicas_that_run_at_their_price(sessions: Any) -> None:
    replicas = FakeReplicas({"llama-8b": 2, "llama-405b": 1})
    clock = Clock(START)
    counter = sampler(sessions, replicas)
    await counter.tick(clock())
    async with sessions() as session:
        assert await spend.last_counted(session) == START
        assert await spend.last_24h(session, START) == pytest.approx(2 * MINUTE_8B + MINUTE_405B)
        models = await spend.by_model(session, START - timedelta(days=1), START)
    assert [(m.model_id, round(m.usd, 6), round(m.gpu_hours, 6)) for m in models] == [
        ("llama-405b", round(MINUTE_405B, 6), round(8 / 60, 6)),
        ("llama-8b", round(2 * MINUTE_8B, 6), round(2 / 60, 6)),
        ("trinity-truebase", 0.0, 0.0),  # counted, with no replica: it costs nothing
    ]
    replicas.counts = {"trinity-truebase": 1}
    await counter.tick(clock.advance(seconds=90))  # a late tick counts the 90 seconds since the last
    async with sessions() as session:
        assert await spend.spend_between(session, START, clock()) == pytest.approx(1.5 * MINUTE_405B)
        assert await spend.last_24h(session, clock()) == pytest.approx(2 * MINUTE_8B + 2.5 * MINUTE_405B)
    await counter.tick(clock.advance(hours=3))  # a Runner away for hours saw none of it: five minutes at most
    async with sessions() as session:
        assert await spend.spend_between(session, clock() - timedelta(seconds=1), clock()) == pytest.approx(
            5 * MINUTE_405B)
        assert await spend.last_24h(session, clock() + timedelta(hours=24)) == 0.0  # the samples aged out


def test_replicas_hold_their_gpus_from_their_actors_start_until_they_stopped() -> None:
    def replica(state: str, actor: bool = True) -> dict[str, Any]:
        # As Serve's controller details each replica (get_serve_details).
        return ReplicaDetails(replica_id=state.lower(), state=ReplicaState(state), actor_id="a1" if actor else None,
                              start_time_s=1.0).model_dump(exclude_unset=True)

    replicas = [replica("RUNNING"), replica("RUNNING"), replica("STARTING"), replica("STARTING", actor=False),
                replica("PENDING_MIGRATION"), replica("STOPPING"), replica("STOPPED")]
    # The one without an actor waits for Ray to find its GPUs: no container runs for it.
    assert holding_gpus(replicas) == 5
    assert holding_gpus([]) == 0


async def test_the_replicas_are_counted_through_each_models_deployment(monkeypatch: pytest.MonkeyPatch) -> None:
    from deployments import replica_states

    listed = {("acs", "model-llama-8b"): [{"replica_id": "r1", "state": "RUNNING", "actor_id": "a1"}],
              ("acs", "model-llama-405b"): []}
    monkeypatch.setattr(replica_states, "serve_replicas", lambda app, deployment: listed.get((app, deployment)))
    handles = {model_id: SimpleNamespace(app_name="acs", deployment_name=f"model-{model_id}")
               for model_id in ("llama-8b", "llama-405b", "trinity-truebase")}
    count = serve_replica_counter(handles)
    assert await count(["llama-8b", "llama-405b"]) == {"llama-8b": 1, "llama-405b": 0}
    with pytest.raises(RuntimeError, match="Serve does not list the deployment of trinity-truebase"):
        await count(["trinity-truebase"])  # no count, rather than a count of nothing


# -- the automatic pause ---------------------------------------------------------------------------------------

async def test_new_gpu_work_pauses_at_the_limit_and_records_a_pause_at_the_amount(sessions: Any) -> None:
    counter = sampler(sessions, FakeReplicas({"llama-405b": 1}), pause_usd=1.0)
    clock = Clock(START)
    await counter.tick(clock())
    assert not (await stop_now(sessions)).locked  # $0.61 of $1.00
    await counter.tick(clock.advance(minutes=1))
    stop = await stop_now(sessions)
    assert stop.locked and stop.changed_at == clock()
    reason = (f"The GPUs cost ${2 * MINUTE_405B:,.2f} since the last Clear within 24 hours, at the stop of $1.00.")
    assert stop.reason == reason
    assert await changes(sessions) == [("pause", spend.PLATFORM, reason, 1.0)]
    await counter.tick(clock.advance(minutes=1))
    assert len(await changes(sessions)) == 1  # one pause, not one a minute


async def test_only_a_clear_lifts_the_pause_and_then_the_pause_counts_from_the_clear(sessions: Any) -> None:
    replicas = FakeReplicas({"llama-405b": 1})
    counter = sampler(sessions, replicas, pause_usd=1.0)
    clock = Clock(START)
    for _ in range(2):
        await counter.tick(clock.advance(minutes=1))
    assert (await stop_now(sessions)).locked
    replicas.counts = {}
    for _ in range(3):  # a day later nothing runs and the 24 hours cost nothing: still paused
        await counter.tick(clock.advance(hours=10))
    assert (await stop_now(sessions)).locked
    replicas.counts = {"llama-405b": 1}
    await counter.tick(clock.advance(minutes=1))
    await counter.tick(clock.advance(minutes=1))
    async with sessions() as session:
        await spend.clear(session, "ada", clock())
    assert not (await stop_now(sessions)).locked
    assert await counted(sessions, clock()) == 0.0  # $1.21 in 24 hours, but none since the Clear
    await counter.tick(clock.advance(minutes=1))
    assert not (await stop_now(sessions)).locked
    await counter.tick(clock.advance(minutes=1))
    assert (await stop_now(sessions)).locked
    assert [kind for kind, *_ in await changes(sessions)] == ["pause", "clear", "pause"]


async def test_the_pause_counts_24_hours_when_the_clear_is_older(sessions: Any) -> None:
    async with sessions() as session:
        await spend.clear(session, "ada", START - timedelta(days=3))
    counter = sampler(sessions, FakeReplicas({"llama-8b": 1}))
    clock = Clock(START)
    await counter.tick(clock())
    assert await counted(sessions, clock()) == pytest.approx(MINUTE_8B)
    assert await counted(sessions, clock() + timedelta(hours=24)) == 0.0


async def test_an_admins_lock_stands_and_no_pause_is_recorded_over_it(sessions: Any) -> None:
    async with sessions() as session:
        await spend.lock(session, "ada", "a review of the month", START)
    counter = sampler(sessions, FakeReplicas({"llama-405b": 1}), pause_usd=0.5)
    await counter.tick(START + timedelta(minutes=1))
    assert await changes(sessions) == [("lock", "ada", "a review of the month", None)]
    assert (await stop_now(sessions)).reason == "a review of the month"


async def test_locks_and_clears_are_recorded_with_who_made_them(sessions: Any) -> None:
    clock = Clock(START)
    async with sessions() as session:
        locked = await spend.lock(session, "ada", "month end", clock())
        assert (locked.locked, locked.reason, locked.changed_at) == (True, "month end", clock())
        await spend.clear(session, "bob", clock.advance(minutes=5))
        await spend.lock(session, "cy", "", clock.advance(minutes=5))
    assert await changes(sessions) == [("lock", "cy", "", None), ("clear", "bob", "", None),
                                       ("lock", "ada", "month end", None)]
    async with sessions() as session:
        newest = await spend.changes(session, limit=1)
        assert [(c.kind, c.at) for c in newest] == [(StopChangeKind.lock, clock())]
        # The callers that name no time or admin (the command line's old lock, tests) are recorded too.
        await spend.set_spend_stop(session, False)
    assert not (await stop_now(sessions)).locked
    assert (await changes(sessions))[0] == ("clear", "", "", None)


async def test_ten_changes_are_listed_newest_first(sessions: Any) -> None:
    clock = Clock(START)
    for n in range(12):
        async with sessions() as session:
            await spend.lock(session, f"admin-{n}", "", clock.advance(minutes=1))
    assert [by for _, by, _, _ in await changes(sessions)] == [f"admin-{n}" for n in range(11, 1, -1)]


@pytest.mark.postgres
async def test_two_pauses_at_once_record_one(sessions: Any) -> None:
    """The stop's row is locked for each change, so a pause sees the other's."""
    async def pause() -> bool:
        async with sessions() as session:
            return await spend.pause_at(session, 3000.0, START, counted=3001.0)

    assert sorted(await asyncio.gather(pause(), pause(), pause())) == [False, False, True]
    assert [kind for kind, *_ in await changes(sessions)] == ["pause"]


# -- what the API answers while paused -------------------------------------------------------------------------

async def test_the_api_answers_429_spend_cap_while_paused_and_runs_after_the_clear(
        fake_stack: Any, sessions: Any) -> None:
    async def complete() -> Any:
        return await fake_stack.http.post("/v1/completions", headers=fake_stack.auth(),
                                          json={"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2})

    counter = sampler(sessions, FakeReplicas({"llama-405b": 1}), pause_usd=0.1)
    try:
        await counter.tick(START)
        await asyncio.sleep(1.1)  # the API reads the stop at most once a second
        assert_error(await complete(), 429, "spend_cap", headers={"Retry-After": "3600", "x-should-retry": "false"})
    finally:
        async with sessions() as session:
            await spend.clear(session, "ada", START)
    await asyncio.sleep(1.1)
    assert (await complete()).status_code == 200


# -- the loops in the Runner's replica ------------------------------------------------------------------------

async def test_the_runner_replica_runs_the_sampler_and_it_pauses_by_itself(fake_stack: Any, sessions: Any) -> None:
    base = fake_stack.services
    clients = {model_id: gateway.client for model_id, gateway in base.gateways.items()}
    services = compose(base.settings, base.catalog, clients, base.sessions.kw["bind"], tokenizers=base.tokenizers,
                       counts=base.counts)
    handles = {model_id: FakeModelHandle() for model_id in GPU.models}
    # A minute's price is far above this limit: the first count pauses.
    operations = build_operations(sessions, GPU, handles, pause_usd=1e-6, sample_s=0.02,
                                  count_replicas=FakeReplicas({"llama-405b": 1}), clock=Clock(START))
    server = RunnerServer.__new__(RunnerServer)
    await server.__init__(handles, "test", lambda _handles, _profile: Background(build_runner(services), operations))
    try:
        for _ in range(250):
            if (await stop_now(sessions)).locked:
                break
            await asyncio.sleep(0.02)
        await server.check_health()
    finally:
        await server.__del__()
    assert [(kind, by, usd) for kind, by, _, usd in await changes(sessions)] == [("pause", spend.PLATFORM, 1e-6)]
    async with sessions() as session:
        assert await spend.last_counted(session) == START
        assert len(await spend.by_model(session, START - timedelta(minutes=1), START)) == 3
