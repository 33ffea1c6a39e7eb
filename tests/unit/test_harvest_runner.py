"""Harvests on the Runner, with the GPU run faked at its boundary (`Runs`):
the Hold when it starts, the charge of a done run, failures that cost
nothing, cancels, and restarts that follow the same run and charge once.
The real run (Ray Data on the tiny model) is in tests/e2e/test_e2e_harvest.py."""
from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from datetime import datetime, timezone
from typing import Any, AsyncIterator

import httpx
import pytest
import pytest_asyncio
from sqlalchemy import delete
from sqlmodel import col, select

from domain.harvests.closing import close_ended_runs
from domain.harvests.handler import LOST, TOKENS_SHORT, UNAUTHENTICATED, HarvestHandler
from cluster.composition import compose
from deployments.background.runner import Runner, RunnerTimes
from ledger.accounts.keys import set_key_status
from ledger.accounts.tables import KeyStatus
from ledger.tokens.tables import Hold, HoldState
from ledger.work.tables import Harvest, Work, WorkKind
from tests.accounts import left, principal, set_tokens

pytestmark = pytest.mark.postgres

BODY = {"model": "llama-8b", "prompts": ["The sky is", "Grass is"], "layers": [0, 2]}
RESERVED = len("The sky is") + 1 + len("Grass is") + 1  # UTF-8 bytes and a start token each
RESULT = {"n_shards": 1, "layer_indices": [0, 2], "contents": "activations", "tokens": 7, "bytes_written": 4096,
          "timings": {"load_s": 0.5, "forward_s": 0.1, "save_s": 0.01, "upload_s": 0.0}}


@dataclasses.dataclass
class Status:
    state: str = "running"
    prompts_done: int = 0
    n_prompts: int = 2
    gpu_started_at: float | None = None
    result: dict | None = None
    error: str | None = None


class FakeRun:
    def __init__(self) -> None:
        self.current, self.cancelled = Status(), False

    async def status(self) -> Status:
        return dataclasses.replace(self.current)

    async def cancel(self) -> None:
        self.cancelled = True
        self.current = Status(state="failed", error="cancelled")

    def gpu_starts(self) -> None:
        self.current = dataclasses.replace(self.current, gpu_started_at=time.time(), prompts_done=1)

    def ends(self, tokens_read: int = 7) -> None:
        self.current = Status("done", 2, 2, self.current.gpu_started_at or time.time(),
                              {**RESULT, "tokens_read": tokens_read})


class FakeRuns:
    """The Ray cluster's runs, by name; `started` counts each start."""

    def __init__(self) -> None:
        self.runs: dict[str, FakeRun] = {}
        self.started: list[str] = []
        self.closed: list[str] = []

    async def start(self, name: str, make_spec: Any) -> FakeRun:
        if name not in self.runs:
            self.started.append(name)
            self.runs[name] = FakeRun()
        return self.runs[name]

    async def find(self, name: str) -> FakeRun | None:
        return self.runs.get(name)

    async def live(self) -> list[str]:
        return list(self.runs)

    async def close(self, name: str) -> None:
        """The actor goes, and its status with it."""
        self.closed.append(name)
        self.runs.pop(name, None)


@dataclasses.dataclass
class Harvests:
    stack: Any
    runs: FakeRuns
    runners: list[Runner]

    def runner(self, lease_s: float = 1.0) -> Runner:
        """A Runner of its own process identity that runs harvests only."""
        base = self.stack.services
        clients = {model_id: gateway.client for model_id, gateway in base.gateways.items()}
        services = compose(base.settings, base.catalog, clients, base.sessions.kw["bind"], tokenizers=base.tokenizers,
                           counts=base.counts)
        handler = HarvestHandler(services, self.runs, poll_s=0.02)
        runner = Runner(services.ledger, [handler], list(base.catalog.models),
                        RunnerTimes(lease_s=lease_s, poll_s=0.02, grace_s=0.2))
        runner.start()
        self.runners.append(runner)
        return runner

    async def submit(self, body: dict | None = None) -> dict:
        r = await self.stack.http.post("/v1/harvest", json=body or BODY, headers=self.stack.auth())
        assert r.status_code == 202, r.text
        return r.json()

    async def read(self, job_id: str) -> Any:
        return await self.stack.http.get(f"/v1/harvest/{job_id}", headers=self.stack.auth())

    async def until(self, job_id: str, check: Any, timeout_s: float = 10.0) -> httpx.Response:
        async with asyncio.timeout(timeout_s):
            while True:
                r = await self.read(job_id)
                if check(r.json()):
                    return r
                await asyncio.sleep(0.02)

    async def holds(self, job_id: str) -> list[Hold]:
        async with self.stack.services.sessions() as session:
            work = await session.get(Work, job_id)
            return list((await session.exec(select(Hold).where(col(Hold.request_id) == work.request_id)
                                             .order_by(col(Hold.created_at)))).all())

    async def run_of(self, job_id: str) -> FakeRun:
        """The harvest's run, once the Runner started it."""
        async with asyncio.timeout(10):
            while f"harvest-{job_id}" not in self.runs.runs:
                await asyncio.sleep(0.01)
        return self.runs.runs[f"harvest-{job_id}"]


@pytest_asyncio.fixture
async def harvests(fake_stack: Any) -> AsyncIterator[Harvests]:
    async with fake_stack.services.ledger.write_sessions() as session:
        await session.exec(delete(Harvest))
        await session.exec(delete(Work).where(col(Work.kind) == WorkKind.harvest))
        await session.commit()
    state = Harvests(fake_stack, FakeRuns(), [])
    yield state
    for runner in state.runners:
        await runner.stop()


def has(status: str) -> Any:
    return lambda job: job["status"] == status


async def test_a_done_harvest_pays_what_it_read_and_shows_its_progress(harvests: Harvests) -> None:
    job = await harvests.submit()
    harvests.runner()
    run = await harvests.run_of(job["job_id"])  # started once its Hold was taken
    (hold,) = await harvests.holds(job["job_id"])
    assert (hold.state, hold.tokens, hold.source.value) == (HoldState.held, RESERVED, "harvest")
    run.gpu_starts()
    r = await harvests.until(job["job_id"], lambda j: j["started_at"] is not None)
    assert r.headers["x-acs-harvest-progress"] == "prompts=1/2"
    (await harvests.run_of(job["job_id"])).ends(tokens_read=7)
    done = (await harvests.until(job["job_id"], has("done"))).json()
    assert done["tokens"] == 7 and done["result"]["n_shards"] == 1 and done["result"]["tokens"] == 7
    (hold,) = await harvests.holds(job["job_id"])
    assert (hold.state, hold.used) == (HoldState.settled, 7)
    assert (await left(harvests.stack)).allowance_used == 7


async def test_a_failed_run_costs_nothing_and_says_why(harvests: Harvests) -> None:
    job = await harvests.submit()
    harvests.runner()
    await harvests.until(job["job_id"], has("running"))
    (await harvests.run_of(job["job_id"])).current = Status(state="failed", error="The GPU run timed out after 60 minutes.")
    failed = (await harvests.until(job["job_id"], has("failed"))).json()
    assert (failed["error"], failed["tokens"]) == ("The GPU run timed out after 60 minutes.", 0)
    (hold,) = await harvests.holds(job["job_id"])
    assert hold.state == HoldState.released
    assert (await left(harvests.stack)).allowance_used == 0


async def test_tokens_that_no_longer_hold_the_prompts_fail_it_at_its_start(harvests: Harvests) -> None:
    job = await harvests.submit()
    await set_tokens(harvests.stack, allowance=RESERVED - 1)
    harvests.runner()
    failed = (await harvests.until(job["job_id"], has("failed"))).json()
    assert failed["error"] == TOKENS_SHORT and harvests.runs.started == []
    assert await harvests.holds(job["job_id"]) == []


@pytest.mark.parametrize("gpu_started, charged", [(True, RESERVED), (False, 0)])
async def test_a_cancel_while_running_pays_the_hold_only_after_the_gpu_run_started(
        harvests: Harvests, gpu_started: bool, charged: int) -> None:
    job = await harvests.submit()
    harvests.runner()
    await harvests.until(job["job_id"], has("running"))
    run = await harvests.run_of(job["job_id"])
    if gpu_started:
        run.gpu_starts()
        await harvests.until(job["job_id"], lambda j: j["started_at"] is not None)
    r = await harvests.stack.http.delete(f"/v1/harvest/{job['job_id']}", headers=harvests.stack.auth())
    assert r.status_code == 200 and r.json()["status"] == "cancelled" and r.json()["tokens"] == charged
    async with asyncio.timeout(5):
        while not run.cancelled:  # the Runner stops the GPU run too
            await asyncio.sleep(0.02)
    (hold,) = await harvests.holds(job["job_id"])
    assert hold.state == (HoldState.settled if gpu_started else HoldState.released)
    assert (await left(harvests.stack)).allowance_used == charged


async def test_a_planned_restart_follows_the_same_run_and_charges_once(harvests: Harvests) -> None:
    job = await harvests.submit()
    first = harvests.runner()
    await harvests.until(job["job_id"], has("running"))
    (await harvests.run_of(job["job_id"])).gpu_starts()
    await harvests.until(job["job_id"], lambda j: j["started_at"] is not None)
    await first.stop()  # the planned stop: back to pending, its Hold released, the run goes on
    assert (await harvests.read(job["job_id"])).json()["status"] == "pending"
    harvests.runner()
    await harvests.until(job["job_id"], has("running"))
    (await harvests.run_of(job["job_id"])).ends(tokens_read=7)
    done = (await harvests.until(job["job_id"], has("done"))).json()
    assert harvests.runs.started == [f"harvest-{job['job_id']}"]  # one GPU run
    released, settled = await harvests.holds(job["job_id"])
    assert (released.state, settled.state, settled.used) == (HoldState.released, HoldState.settled, 7)
    assert done["tokens"] == 7 and (await left(harvests.stack)).allowance_used == 7


async def test_a_crashed_runner_is_found_by_its_lease_and_the_run_followed(harvests: Harvests) -> None:
    job = await harvests.submit()
    crashed = harvests.runner(lease_s=0.5)
    await harvests.until(job["job_id"], has("running"))
    (await harvests.run_of(job["job_id"])).gpu_starts()
    await harvests.until(job["job_id"], lambda j: j["started_at"] is not None)
    for task in crashed._loops + list(crashed.attempts.values()):  # kill -9: nothing runs its cleanup
        task.cancel()
    await asyncio.sleep(0)
    harvests.runners.remove(crashed)
    await crashed.ledger.leases.stop()
    harvests.runner(lease_s=0.5)
    (await harvests.run_of(job["job_id"])).ends(tokens_read=5)
    done = (await harvests.until(job["job_id"], has("done"))).json()
    assert harvests.runs.started == [f"harvest-{job['job_id']}"] and done["tokens"] == 5


async def test_a_run_that_read_on_a_gpu_and_is_gone_fails_without_a_second_run(harvests: Harvests) -> None:
    job = await harvests.submit()
    first = harvests.runner()
    await harvests.until(job["job_id"], has("running"))
    (await harvests.run_of(job["job_id"])).gpu_starts()
    await harvests.until(job["job_id"], lambda j: j["started_at"] is not None)
    await first.stop()
    harvests.runs.runs.clear()  # its actor is gone, with what it read
    harvests.runner()
    failed = (await harvests.until(job["job_id"], has("failed"))).json()
    assert failed["error"] == LOST and failed["tokens"] == 0
    assert harvests.runs.started == [f"harvest-{job['job_id']}"]


async def test_a_revoked_keys_pending_harvest_fails_unauthenticated(harvests: Harvests) -> None:
    job = await harvests.submit()
    who = await principal(harvests.stack)
    async with harvests.stack.services.ledger.write_sessions() as session:
        assert who.key_id is not None
        await set_key_status(session, who.key_id, KeyStatus.revoked)
        await session.commit()
    harvests.runner()
    async with asyncio.timeout(10):
        while True:
            async with harvests.stack.services.sessions() as session:
                work = await session.get(Work, job["job_id"])
            if work.status.value == "failed":
                break
            await asyncio.sleep(0.05)
    assert json.loads(work.result_body) == {"tokens": 0, "error": UNAUTHENTICATED, "code": "unauthenticated"}
    assert harvests.runs.started == []


async def test_housekeeping_closes_the_runs_of_ended_harvests_only(harvests: Harvests) -> None:
    async def housekeeping() -> int:
        return await close_ended_runs(harvests.stack.services.sessions, harvests.runs,
                                      datetime(2026, 1, 1, tzinfo=timezone.utc))

    first = harvests.runner()
    done = await harvests.submit()
    (await harvests.run_of(done["job_id"])).ends()
    await harvests.until(done["job_id"], has("done"))
    gone = f"harvest-{uuid.uuid4()}"  # a run whose harvest the ledger no longer has
    harvests.runs.runs[gone] = FakeRun()
    job = await harvests.submit()
    run = await harvests.run_of(job["job_id"])
    await harvests.until(job["job_id"], has("running"))
    assert await housekeeping() == 2
    assert sorted(harvests.runs.closed) == sorted([f"harvest-{done['job_id']}", gone])
    assert list(harvests.runs.runs) == [f"harvest-{job['job_id']}"]  # its Runner follows it still
    # The run ended, but no Runner wrote the result (it stopped): its row has not ended,
    # so the run stays for the Runner that follows it next.
    await first.stop()
    run.ends(tokens_read=5)
    assert (await harvests.read(job["job_id"])).json()["status"] == "pending"
    assert await housekeeping() == 0 and list(harvests.runs.runs) == [f"harvest-{job['job_id']}"]
    harvests.runner()
    assert (await harvests.until(job["job_id"], has("done"))).json()["tokens"] == 5
    assert await housekeeping() == 1 and harvests.runs.runs == {}
    assert harvests.runs.closed[-1] == f"harvest-{job['job_id']}"
