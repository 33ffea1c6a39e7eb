"""The Playground's Runs (/account/runs) on the fake engine with in-process Runners on PostgreSQL:
start, list, read, stop, stop a group, delete, export, the stream; each request checked as
POST /v1/completions checks it; numbers and groups; no API key; a planned restart and a crash
found by the lease; the Usage source `playground`; kept data (spec: "Use the Playground",
"Work in the background", "Holds of background work", "Kept data").

The fake engine writes tokens " t1000", " t1001", ... (choice i: " t(1000 + 100 i)", ...);
"The sky is" is 4 tokens.
"""
from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import time
import uuid
from datetime import timedelta
from typing import Any

import pandas
import pytest
import pytest_asyncio
import redis.asyncio as aioredis
from ray.exceptions import ActorDiedError
from sqlalchemy import delete, update
from sqlmodel import col, select

from domain.feeds import RedisFeed
from domain.playground import stream
from domain.playground.handler import FAILED
from domain.playground.news import CHANGED, TextsSoFar, run_topic
from domain.traffic.limits import BucketPolicy
from ledger.accounts.keys import create_api_key, set_key_status, set_standing
from ledger.accounts.tables import KeyStatus, Standing, User
from ledger.audit import find_violations
from ledger.store.coltypes import utcnow
from ledger.tokens.grants import set_allowance
from ledger.tokens.tables import Counting, Hold, HoldState, UsageSource
from ledger.work import runs
from ledger.work.runs import NewRun, RunEnd, RunGrowth
from ledger.work.tables import PlaygroundActivations, PlaygroundRun, RunStatus, Work, WorkKind, WorkStatus
from tests.own_account import OwnAccount, sign_in
from tests.spec import assert_error
from tests.unit.test_jobs import Jobs, _crash, jobs  # noqa: F401 - jobs: the fixture
from tests.unit.test_loom_stream import REDIS_URL
from tests.waiting import wait_until

pytestmark = pytest.mark.postgres

SKY = {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2, "stream": True}
DONE = "[DONE]"


def fake_text(count: int, first: int = 1000) -> str:
    return "".join(f" t{first + i}" for i in range(count))


@dataclasses.dataclass
class Playground(Jobs):
    """The Jobs' fake stack and Runners, with a User signed in to the App."""

    account: OwnAccount = dataclasses.field(default=None)  # type: ignore[assignment]

    async def start(self, *requests: Any, account: OwnAccount | None = None) -> dict:
        return await (account or self.account).ok("POST", "/account/runs", {"requests": list(requests)}, status=201)

    async def one(self, request: dict | None = None) -> dict:
        """One Run of `request` (SKY), started."""
        answer = await self.start(request or SKY)
        assert answer["refused"] == [], answer
        (run,) = answer["runs"]
        return run

    async def read(self, run_id: str) -> dict:
        return await self.account.ok("GET", f"/account/runs/{run_id}")

    async def wait(self, run_id: str, *statuses: str, text: bool = False, timeout_s: float = 10.0) -> dict:
        """The Run once it is in one of `statuses` (and, with `text`, has some)."""
        deadline = time.monotonic() + timeout_s
        while True:
            run = await self.read(run_id)
            if run["status"] in statuses and (not text or (run["choices"] and run["choices"][0]["text"])):
                return run
            assert time.monotonic() < deadline, f"run still {run['status']} {run['choices']}, not {statuses}"
            await asyncio.sleep(0.02)

    async def run_holds(self, run_id: str) -> list[Hold]:
        return await self.holds(f"run-{uuid.UUID(run_id).hex}")

    async def work_of(self, run_id: str) -> Work:
        async with self.stack.services.sessions() as session:
            run = await session.get(PlaygroundRun, uuid.UUID(run_id))
            assert run is not None
            work = await session.get(Work, run.work_id)
            assert work is not None
            return work


@pytest_asyncio.fixture
async def playground(jobs: Jobs) -> Playground:
    """The Jobs' fixture (its work table empty, its Runners stopped at the end), without Runs, and
    a new User signed in to the App, without an API key."""
    async with jobs.stack.services.ledger.write_sessions() as session:
        await session.exec(delete(PlaygroundActivations))
        await session.exec(delete(PlaygroundRun))
        await session.commit()
    return Playground(jobs.stack, jobs.runners, await sign_in(jobs.stack, key_name=None))


def text_of(run: dict, index: int = 0) -> str:
    return run["choices"][index]["text"]


# -- a Run grows, without a key -----------------------------------------------------------------------------


@pytest.mark.fake(delay_s=0.1)
async def test_a_run_grows_as_its_text_is_written_and_completes_without_an_api_key(playground: Playground) -> None:
    request = {**SKY, "max_tokens": 8, "logprobs": 1}
    run = await playground.one(request)
    assert (run["number"], run["status"], run["group_id"], run["request"]) == (1, "queued", None, request)
    assert run["object"] == "playground.run" and run["choices"] == [] and run["error"] is None
    playground.runner()
    running = await playground.wait(run["id"], "running", text=True)
    assert fake_text(8).startswith(text_of(running)) and text_of(running) != fake_text(8)
    done = await playground.wait(run["id"], "completed")
    (choice,) = done["choices"]
    assert (choice["index"], choice["text"], choice["finish_reason"]) == (0, fake_text(8), "length")
    assert choice["logprobs"]["tokens"] == [f" t{1000 + i}" for i in range(8)]
    assert done["usage"] == {"prompt_tokens": 4, "completion_tokens": 8, "total_tokens": 12}
    assert done["used_tokens"] == 12 and done["completion_id"].startswith("cmpl-")
    assert done["finished_at"] >= done["started_at"] >= done["created_at"]
    # Its own Hold, of the source `playground`, with no key; settled to Inference's usage.
    (hold,) = await playground.run_holds(run["id"])
    assert (hold.source, hold.key_id, hold.state, hold.used, hold.counting) == (
        UsageSource.playground, None, HoldState.settled, 12, Counting.reported)
    work = await playground.work_of(run["id"])
    assert (work.kind, work.key_id, work.status) == (WorkKind.run, None, WorkStatus.succeeded)
    # Runs count in Usage as the source `playground`.
    usage = await playground.account.ok("GET", "/account/usage")
    (source,) = [line for line in usage["by_source"] if line["source"] == "playground"]
    assert source["completions"] == 1 and [row["source"] for row in usage["recent"]] == ["playground"]


async def test_a_run_without_a_seed_samples_with_one_of_its_own_that_it_keeps_and_its_request_stays_exact(
        playground: Playground) -> None:
    """Restore brings a comparison back "with its seed": so a Run whose request left `seed` out
    samples with a seed chosen at its start, which its JSON names; its request stays as sent."""
    plain, seeded = (await playground.start(SKY, {**SKY, "seed": 7}))["runs"]
    assert plain["request"] == SKY
    assert isinstance(plain["seed"], int) and 0 <= plain["seed"] < 2**31 and seeded["seed"] == 7
    playground.runner()
    await playground.wait(plain["id"], "completed")
    await playground.wait(seeded["id"], "completed")
    sent = {request.request_id.split("-")[1]: request.sampling.seed for request in playground.stack.engine.seen}
    assert sent == {uuid.UUID(plain["id"]).hex: plain["seed"], uuid.UUID(seeded["id"]).hex: 7}
    assert (await playground.read(plain["id"]))["seed"] == plain["seed"]


async def test_a_paused_or_revoked_key_of_the_user_does_not_touch_a_run(playground: Playground) -> None:
    async with playground.stack.services.ledger.write_sessions() as session:
        revoked, _ = await create_api_key(session, playground.account.user_id, "revoked")
        paused, _ = await create_api_key(session, playground.account.user_id, "paused")
        await session.commit()
        await set_key_status(session, revoked.id, KeyStatus.revoked)
        await set_key_status(session, paused.id, KeyStatus.paused)
        await session.commit()
    run = await playground.one()
    playground.runner()
    assert text_of(await playground.wait(run["id"], "completed")) == fake_text(2)


@pytest.mark.fake(first_delay_s=1.0)
@pytest.mark.settings(engine_timeout_s=0.3, long_wait_s=5.0)
async def test_a_run_waits_for_inferences_answer_past_the_apis_wait_up_to_the_background_wait(
        playground: Playground) -> None:
    """A Run waits as background work does, up to ACS_BACKGROUND_ANSWER_WAIT_S (45 minutes, 5 s
    here) for a cold model's answer, where POST /v1/completions gives up after 0.3 s; past its own
    wait (0.5 s in the second Runner) it fails, and keeps nothing."""
    patient = await playground.one()
    runner = playground.runner(background_answer_wait_s=5.0)
    assert text_of(await playground.wait(patient["id"], "completed", timeout_s=20)) == fake_text(2)
    await runner.stop()
    playground.runners.remove(runner)
    hasty = await playground.one()
    playground.runner(background_answer_wait_s=0.5)
    failed = await playground.wait(hasty["id"], "failed", timeout_s=20)
    assert failed["error"]["code"] == "upstream_deadline" and failed["choices"] == [], failed


# -- each request is checked as POST /v1/completions checks it ----------------------------------------------


async def test_each_request_is_refused_as_post_v1_completions_refuses_it_and_nothing_is_made(
        playground: Playground) -> None:
    account = await sign_in(playground.stack)  # with a key, for POST /v1/completions
    bad = [
        {**SKY, "model": "gpt-4"},
        {**SKY, "temperature": 9},
        {**SKY, "bogus": 1},
        {**SKY, "max_tokens": "2"},
        {**SKY, "n": 2, "max_tokens": 16001},
        {**SKY, "output_residual_stream": [99]},
    ]
    answer = await playground.start(*bad, account=account)
    assert answer["runs"] == []
    assert [refusal["index"] for refusal in answer["refused"]] == list(range(len(bad)))
    for body, refusal in zip(bad, answer["refused"]):
        direct = await playground.stack.http.post("/v1/completions", json=body,
                                                  headers={"Authorization": f"Bearer {account.key}"})
        assert refusal["status"] == direct.status_code, body
        assert refusal["error"] == direct.json()["error"], body
    assert (await account.ok("GET", "/account/runs"))["data"] == []
    assert [row for row in await playground.rows() if row.kind == WorkKind.run] == []


async def test_a_start_that_the_tokens_cannot_hold_is_refused_with_budget_exceeded(playground: Playground) -> None:
    async with playground.stack.services.ledger.write_sessions() as session:
        await set_allowance(session, playground.account.user_id, 4)
    answer = await playground.start(SKY)
    (refusal,) = answer["refused"]
    assert (refusal["index"], refusal["status"], refusal["error"]["code"]) == (0, 429, "budget_exceeded")
    assert answer["runs"] == []


async def test_a_body_that_is_not_a_list_of_1_to_6_requests_is_a_400(playground: Playground) -> None:
    call = playground.account.call
    assert_error(await call("POST", "/account/runs", {"requests": [SKY] * 7}), 400, "invalid_request",
                 param="requests")
    assert_error(await call("POST", "/account/runs", {"requests": []}), 400, "invalid_request", param="requests")
    assert_error(await call("POST", "/account/runs", {"requests": SKY}), 400, "invalid_request", param="requests")
    assert_error(await call("POST", "/account/runs", {}), 400, "invalid_request", param="requests")
    assert_error(await call("POST", "/account/runs", {"requests": [SKY], "n": 2}), 400, "invalid_request",
                 param="n")


@pytest.mark.traffic(app_user=BucketPolicy(2, 2 / 60))
async def test_runs_count_against_the_apps_limit_of_each_user(playground: Playground) -> None:
    await playground.start(SKY, SKY)
    r = await playground.account.call("POST", "/account/runs", {"requests": [SKY]})
    assert_error(r, 429, "rate_limited", type="rate_limit_error")
    assert r.json()["error"]["message"].startswith(
        "You started more than 2 Runs, Completions, Jobs, and Branches in the App in a minute. Try again in ")
    assert int(r.headers["Retry-After"]) >= 1


async def test_the_routes_take_a_session_and_the_csrf_token(playground: Playground) -> None:
    browser = playground.account.browser
    r = await browser.http.post("/account/runs", json={"requests": [SKY]})  # no X-CSRF-Token
    assert_error(r, 403, "csrf_failed")
    r = await playground.stack.http.get("/account/runs", headers=playground.stack.auth())
    assert_error(r, 401, "session_required")


# -- numbers and groups ------------------------------------------------------------------------------------


async def test_a_run_all_is_one_group_numbered_in_order_and_a_refused_model_says_why(
        playground: Playground) -> None:
    answer = await playground.start(SKY, {**SKY, "model": "gpt-4"}, {**SKY, "temperature": 0.5})
    first, second = answer["runs"]
    assert (first["number"], second["number"]) == (1, 2)
    assert first["group_id"] is not None and first["group_id"] == second["group_id"]
    (refusal,) = answer["refused"]
    assert (refusal["index"], refusal["status"], refusal["error"]["code"]) == (1, 400, "model_not_found")
    # Stop all: every Run of the group; queued ones keep no text and cost nothing.
    stopped = await playground.account.ok("POST", f"/account/runs/groups/{first['group_id']}/stop")
    assert [(run["number"], run["status"], run["choices"]) for run in stopped["data"]] == [
        (1, "stopped", []), (2, "stopped", [])]
    assert await playground.run_holds(first["id"]) == []
    assert_error(await playground.account.call("POST", f"/account/runs/groups/{uuid.uuid4()}/stop"), 404, None)


async def test_numbers_are_never_reused_after_a_delete_or_an_erase(playground: Playground) -> None:
    first, second = await playground.one(), await playground.one()
    assert (first["number"], second["number"]) == (1, 2)
    deleted = await playground.account.ok("DELETE", f"/account/runs/{second['id']}")
    assert deleted == {"id": second["id"], "object": "playground.run", "number": 2, "deleted": True}
    assert_error(await playground.account.call("GET", f"/account/runs/{second['id']}"), 404, None)
    assert_error(await playground.account.call("DELETE", f"/account/runs/{second['id']}"), 404, None)
    assert (await playground.one())["number"] == 3
    async with playground.stack.services.ledger.write_sessions() as session:
        await runs.erase_kept(session, utcnow() + timedelta(days=15))
    assert (await playground.one())["number"] == 4
    listed = await playground.account.ok("GET", "/account/runs")
    assert [run["number"] for run in listed["data"]] == [4, 3, 1]


async def test_two_users_number_their_runs_apart(playground: Playground) -> None:
    other = await sign_in(playground.stack, key_name=None)
    assert (await playground.one())["number"] == 1
    assert [run["number"] for run in (await playground.start(SKY, SKY, account=other))["runs"]] == [1, 2]
    assert (await playground.one())["number"] == 2
    mine = (await playground.account.ok("GET", "/account/runs"))["data"]
    assert_error(await other.call("GET", f"/account/runs/{mine[0]['id']}"), 404, None)


async def test_the_list_has_the_newest_100_and_the_rest_of_a_group_that_they_cut(playground: Playground) -> None:
    user_id = playground.account.user_id
    new = NewRun(request=SKY, model="llama-8b", model_id="llama-8b", served_model="llama-8b")
    async with playground.stack.services.ledger.write_sessions() as session:
        group = await runs.create(session, user_id, [new] * 3, utcnow())
        for _ in range(99):
            await runs.create(session, user_id, [new], utcnow())
    listed = (await playground.account.ok("GET", "/account/runs"))["data"]
    assert [run["number"] for run in listed] == [*range(102, 2, -1), 2, 1]
    assert {run["group_id"] for run in listed[-3:]} == {str(group[0].group_id)}
    assert all("logprobs" not in choice for run in listed for choice in run["choices"])
    # Export every run: also those older than the newest 100, oldest first.
    every = await playground.account.ok("GET", "/account/runs/export?format=json&every=true")
    assert [run["number"] for run in every] == list(range(1, 103))


# -- stop and delete ------------------------------------------------------------------------------------------


@pytest.mark.fake(delay_s=0.05)
async def test_a_stopped_run_keeps_its_text_and_pays_its_tokens_and_a_queued_one_costs_nothing(
        playground: Playground) -> None:
    queued = await playground.one()
    stopped = await playground.account.ok("POST", f"/account/runs/{queued['id']}/stop")
    assert (stopped["status"], stopped["choices"]) == ("stopped", [])
    run = await playground.one({**SKY, "max_tokens": 200})
    playground.runner()
    await playground.wait(run["id"], "running", text=True)
    stopped = await playground.account.ok("POST", f"/account/runs/{run['id']}/stop")
    assert stopped["status"] == "stopped" and fake_text(200).startswith(text_of(stopped)) and text_of(stopped)
    await asyncio.sleep(0.3)  # the cut attempt's late writes are dropped
    assert await playground.read(run["id"]) == stopped
    (hold,) = await playground.run_holds(run["id"])
    assert (hold.state, hold.counting, hold.used) == (HoldState.settled, Counting.partial, stopped["used_tokens"])
    assert await playground.run_holds(queued["id"]) == []
    # An ended Run stays as it is.
    assert await playground.account.ok("POST", f"/account/runs/{run['id']}/stop") == stopped


@pytest.mark.fake(delay_s=0.05)
async def test_a_deleted_run_is_gone_at_once_and_a_running_one_stops_first(playground: Playground) -> None:
    run = await playground.one({**SKY, "max_tokens": 200})
    playground.runner()
    await playground.wait(run["id"], "running", text=True)
    await playground.account.ok("DELETE", f"/account/runs/{run['id']}")
    assert_error(await playground.account.call("GET", f"/account/runs/{run['id']}"), 404, None)
    assert (await playground.account.ok("GET", "/account/runs"))["data"] == []
    (hold,) = await playground.run_holds(run["id"])
    assert (hold.state, hold.counting) == (HoldState.settled, Counting.partial)
    work = await playground.work_of(run["id"])
    assert work.status == WorkStatus.cancelled


# -- restarts --------------------------------------------------------------------------------------------------


@pytest.mark.fake(delay_s=0.05)
async def test_a_planned_restart_runs_a_run_again_from_the_beginning(playground: Playground) -> None:
    run = await playground.one({**SKY, "max_tokens": 40})
    first = playground.runner()
    await playground.wait(run["id"], "running", text=True)
    await first.stop()  # its grace (0.5 s) is shorter than the Run's 2 s
    playground.runners.remove(first)
    again = await playground.read(run["id"])
    assert (again["status"], again["choices"], again["used_tokens"]) == ("queued", [], 0)
    playground.runner()
    done = await playground.wait(run["id"], "completed", timeout_s=20)
    assert text_of(done) == fake_text(40)
    holds = await playground.run_holds(run["id"])
    assert sorted((hold.state.value, hold.used) for hold in holds) == [("released", 0), ("settled", 44)]
    assert (await playground.work_of(run["id"])).attempts == 2


@pytest.mark.fake(delay_s=0.05)
async def test_a_crash_found_by_the_lease_fails_the_run_which_keeps_its_text_and_costs_nothing(
        playground: Playground) -> None:
    run = await playground.one({**SKY, "max_tokens": 200})
    dead = playground.runner()
    await playground.wait(run["id"], "running", text=True)
    async def held() -> bool:
        return bool(await playground.run_holds(run["id"]))

    await wait_until(held, timeout_s=10)
    await asyncio.sleep(0.3)  # its text is written
    await _crash(dead)
    playground.runners.remove(dead)
    kept = await playground.read(run["id"])
    assert kept["status"] == "running"  # until its lease lapses
    playground.runner()
    failed = await playground.wait(run["id"], "failed", timeout_s=30)
    assert text_of(failed) and text_of(failed) == text_of(kept) and fake_text(200).startswith(text_of(failed))
    assert failed["error"] == {"message": FAILED, "type": "internal_error", "param": None, "code": "internal_error"}
    (hold,) = await playground.run_holds(run["id"])
    assert (hold.state, hold.used) == (HoldState.released, 0)
    assert kept["used_tokens"] > 0 and failed["used_tokens"] == 0  # the Runs table shows what it cost
    work = await playground.work_of(run["id"])
    assert (work.status, work.attempts) == (WorkStatus.failed, 1)
    await asyncio.sleep(0.5)  # and it does not run again
    assert await playground.read(run["id"]) == failed


# -- a model replica dies under a Run: Inference failed, not the API ---------------------------------------

UNREACHABLE = {"message": "Could not reach Inference: Connection error.", "type": "upstream_error", "param": None,
               "code": "upstream_unreachable", "retryable": True, "retry_after_seconds": 30}


async def audit_of(playground: Playground, run: dict) -> list[Any]:
    """The ledger audit's violations about the Run, its work row or its Holds (the soak's `run_cut_cost`)."""
    work = await playground.work_of(run["id"])
    ours = {run["id"], str(work.id)} | {str(hold.id) for hold in await playground.run_holds(run["id"])}
    found = await find_violations(playground.stack.services.sessions, now=utcnow())
    return [violation for violation in found if violation.subject in ours]


@pytest.mark.fake(delay_s=0.02, fail_after_tokens=3, fail_with=ActorDiedError())
async def test_a_model_replica_dying_mid_stream_fails_the_run_with_inferences_error_and_it_pays_what_was_sent(
        playground: Playground) -> None:
    """Ray's error of a dead replica is Inference failing (a broken stream, as POST /v1/completions
    streams it), not the API stopping: the Run pays the tokens it was sent, and shows them."""
    run = await playground.one({**SKY, "max_tokens": 10})
    playground.runner()
    failed = await playground.wait(run["id"], "failed")
    assert text_of(failed) == fake_text(3) and failed["choices"][0]["finish_reason"] is None
    assert failed["error"] == UNREACHABLE
    assert failed["usage"] == {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7}
    (hold,) = await playground.run_holds(run["id"])
    assert (hold.state, hold.counting, hold.used) == (HoldState.settled, Counting.partial, 4 + 3)
    assert failed["used_tokens"] == hold.used
    work = await playground.work_of(run["id"])
    assert (work.status, work.result_status, work.attempts) == (WorkStatus.failed, 502, 1)
    assert await audit_of(playground, run) == []


@pytest.mark.fake(first_delay_s=0.1, fail_before_first=ActorDiedError())
async def test_a_model_replica_dying_before_the_first_token_fails_the_run_which_shows_0_used_tokens(
        playground: Playground) -> None:
    """The soak's `run_cut_cost` (seed 11): Inference failed before a token, so the Hold is released
    and the Run costs nothing; it showed its prompt's tokens as used."""
    run = await playground.one(SKY)
    playground.runner()
    failed = await playground.wait(run["id"], "failed")
    assert failed["error"] == UNREACHABLE and failed["choices"] == []
    (hold,) = await playground.run_holds(run["id"])
    assert (hold.state, hold.used) == (HoldState.released, 0)
    assert failed["used_tokens"] == 0
    assert (await playground.work_of(run["id"])).status == WorkStatus.failed
    assert await audit_of(playground, run) == []


@pytest.mark.fake(delay_s=0.05)
async def test_a_runner_whose_renewal_came_late_does_not_fail_its_own_live_run(playground: Playground) -> None:
    """A loaded machine or a slow database can hold a renewal past the lease (1 s here): the
    Runner that holds the attempt is alive, so its own check of lapsed leases must leave it."""
    run = await playground.one({**SKY, "max_tokens": 40})
    runner = playground.runner()
    await playground.wait(run["id"], "running", text=True)
    for task in runner._watch:  # its renewals stop, as a late one's would
        task.cancel()
    work = await playground.work_of(run["id"])
    async with playground.stack.services.ledger.write_sessions() as session:
        await session.execute(update(Work).where(col(Work.id) == work.id).values(
            lease_until=utcnow() - timedelta(seconds=5)))
        await session.commit()
    await runner._requeue_lapsed()
    assert (await playground.work_of(run["id"])).status == WorkStatus.running
    done = await playground.wait(run["id"], "completed", timeout_s=20)
    assert text_of(done) == fake_text(40)


async def test_a_suspended_users_queued_run_fails_and_holds_nothing(playground: Playground) -> None:
    """Its session ends with the suspension: the ledger shows the Run."""
    run = await playground.one()
    async with playground.stack.services.ledger.write_sessions() as session:
        user = await session.get(User, playground.account.user_id)
        assert user is not None
        await set_standing(session, user, Standing.suspended)
        await session.commit()
    playground.runner()

    async def failed() -> PlaygroundRun | None:
        async with playground.stack.services.sessions() as session:
            found = await session.get(PlaygroundRun, uuid.UUID(run["id"]))
            return found if found is not None and found.status == RunStatus.failed else None

    async def has_failed() -> bool:
        return await failed() is not None

    await wait_until(has_failed, timeout_s=10)
    row = await failed()
    assert row is not None and json.loads(row.error or "{}")["code"] == "account_suspended" and row.choices == "[]"
    assert await playground.run_holds(run["id"]) == []


# -- export ------------------------------------------------------------------------------------------------------


async def test_export_as_json_jsonl_and_text(playground: Playground) -> None:
    first = await playground.one({**SKY, "n": 2, "logprobs": 1})
    second = await playground.one({**SKY, "prompt": ["A", "B"]})
    playground.runner()
    for run in (first, second):
        await playground.wait(run["id"], "completed")
    ids = f"{second['id']},{first['id']}"

    r = await playground.account.call("GET", f"/account/runs/export?format=json&ids={ids}")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    assert 'filename="runs.json"' in r.headers["content-disposition"]
    exported = r.json()
    assert [run["number"] for run in exported] == [1, 2]  # oldest first
    completion = exported[0]["completion"]
    assert set(completion) == {"id", "object", "created", "model", "choices", "usage"}
    assert completion["object"] == "text_completion" and completion["usage"]["completion_tokens"] == 4
    assert [choice["text"] for choice in completion["choices"]] == [fake_text(2), fake_text(2, 1100)]
    assert exported[0]["request"] == {**SKY, "n": 2, "logprobs": 1} and exported[0]["status"] == "completed"

    r = await playground.account.call("GET", f"/account/runs/export?format=jsonl&ids={ids}")
    table = pandas.read_json(io.StringIO(r.text), lines=True)
    assert list(table["run_number"]) == [1, 1, 2, 2]
    assert list(table["prompt"]) == ["The sky is", "The sky is", "A", "B"]
    assert list(table["text"]) == [fake_text(2), fake_text(2, 1100), fake_text(2), fake_text(2)]

    r = await playground.account.call("GET", "/account/runs/export?format=text&every=true")
    assert r.headers["content-type"].startswith("text/plain")
    assert r.text.index("Run 1, choice 0") < r.text.index("Run 2, choice 1")
    assert f"The sky is{fake_text(2)}\n" in r.text and f"B{fake_text(2)}\n" in r.text

    assert_error(await playground.account.call("GET", "/account/runs/export?format=json"), 400, "invalid_request",
                 param="ids")
    assert_error(await playground.account.call("GET", f"/account/runs/export?format=csv&ids={ids}"), 400,
                 "invalid_request", param="format")
    assert_error(await playground.account.call("GET", f"/account/runs/export?format=json&ids={uuid.uuid4()}"),
                 404, None)


# -- the stream --------------------------------------------------------------------------------------------------


def events_of(body: str) -> list[Any]:
    return [line[len("data: "):] if line == f"data: {DONE}" else json.loads(line[len("data: "):])
            for line in body.split("\n") if line.startswith("data: ")]


@pytest.mark.fake(delay_s=0.1)
async def test_the_stream_follows_a_run_as_it_grows_and_catches_up_after(playground: Playground) -> None:
    run = await playground.one({**SKY, "max_tokens": 10})
    playground.runner()
    r = await playground.account.call("GET", f"/account/runs/stream?ids={run['id']}")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = events_of(r.text)
    assert events[-1] == DONE
    texts = [text_of(event) if event["choices"] else "" for event in events[:-1]]
    assert len(set(texts)) > 2 and texts == sorted(texts, key=len)  # it grew, event by event
    assert events[-2]["status"] == "completed" and text_of(events[-2]) == fake_text(10)
    # A reload catches up from the database: the Run once, then the end.
    again = events_of((await playground.account.call("GET", f"/account/runs/stream?ids={run['id']}")).text)
    assert again == [events[-2], DONE]
    # Without ids: the Runs that grow now (none).
    assert events_of((await playground.account.call("GET", "/account/runs/stream")).text) == [DONE]
    other = await sign_in(playground.stack, key_name=None)
    assert_error(await other.call("GET", f"/account/runs/stream?ids={run['id']}"), 404, None)
    assert_error(await other.call("GET", "/account/runs/stream?ids=nope"), 400, "invalid_request", param="ids")


@pytest.mark.fake(delay_s=0.5)
@pytest.mark.settings(keepalive_s=0.1)
async def test_the_stream_sends_keepalives_while_a_run_writes_nothing(playground: Playground) -> None:
    """The issue's "SSE with keepalive": a proxy that drops a silent connection keeps the stream
    while a cold model's start, or a slow token, leaves the Run without news."""
    run = await playground.one({**SKY, "max_tokens": 3})
    playground.runner()
    r = await playground.account.call("GET", f"/account/runs/stream?ids={run['id']}")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    assert r.text.count(": keepalive\n\n") >= 3, r.text  # 1.5 s of tokens at 0.5 s, a beat each 0.1 s
    events = events_of(r.text)
    assert events[-1] == DONE and events[-2]["status"] == "completed" and text_of(events[-2]) == fake_text(3)


@pytest.mark.fake(delay_s=0.1)
@pytest.mark.settings(stream_catch_up_s=3600)
async def test_on_redis_the_stream_hears_the_runner_of_another_process(playground: Playground) -> None:
    """Where ACS_REDIS_URL is set the Runner publishes on Redis pub/sub: the Runner's replica and the
    ingress's, each with its feed over its own Redis connections. With no catch-up read in the test's
    time, the stream grows and ends on what Redis brought alone."""
    prefix = f"test:feed:{uuid.uuid4().hex}:"
    clients = [aioredis.Redis.from_url(REDIS_URL) for _ in range(2)]
    routes_feed, runner_feed = (RedisFeed(client, prefix=prefix) for client in clients)
    playground.stack.replace_services(feed=routes_feed)
    try:
        run = await playground.one({**SKY, "max_tokens": 10})
        playground.runner(feed=runner_feed)
        r = await asyncio.wait_for(playground.account.call("GET", f"/account/runs/stream?ids={run['id']}"), 30)
        events = events_of(r.text)
        assert events[-1] == DONE
        texts = [text_of(event) if event["choices"] else "" for event in events[:-1]]
        assert len(set(texts)) > 2 and texts == sorted(texts, key=len)  # it grew, message by message
        assert events[-2]["status"] == "completed" and text_of(events[-2]) == fake_text(10)
    finally:
        for runner in playground.runners:
            await runner.stop()
        for feed in (routes_feed, runner_feed):
            await feed.aclose()
        for client in clients:
            await client.aclose()


# -- kept data -------------------------------------------------------------------------------------------------


async def test_activations_are_kept_7_days_and_a_deleted_run_is_erased_14_days_later(
        playground: Playground) -> None:
    user_id = playground.account.user_id
    activations = {"residual_stream": {"data": "KLUv", "dtype": "int16", "original_dtype": "torch.bfloat16",
                                       "shape": [1, 5, 64], "compression": "zstd"}}
    new = NewRun(request={**SKY, "output_residual_stream": [0]}, model="llama-8b", model_id="llama-8b",
                 served_model="llama-8b")
    now = utcnow()
    async with playground.stack.services.ledger.write_sessions() as session:
        (made,) = await runs.create(session, user_id, [new], now)
        assert await runs.start(session, made.id, 1, now) == new.request
        usage = {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}
        growth = RunGrowth(made.id, 1, "cmpl-1", [{"index": 0, "text": " t1000 t1001"}], usage)
        assert await runs.end_within(session, RunEnd(RunStatus.completed, growth, activations=activations), now)
        await session.commit()
    run_id = str(made.id)
    read = await playground.read(run_id)
    assert read["activations"] is not None and read["status"] == "completed"
    assert await playground.account.ok("GET", f"/account/runs/{run_id}/activations") == activations
    exported = (await playground.account.ok("GET", f"/account/runs/export?format=json&ids={run_id}"))[0]
    assert exported["completion"]["activations"] == activations
    # Export every run has each Run's text and log probabilities, without the Activations.
    (every,) = await playground.account.ok("GET", "/account/runs/export?format=json&every=true")
    assert every["completion"]["choices"] == exported["completion"]["choices"] and "activations" not in every["completion"]

    async with playground.stack.services.ledger.write_sessions() as session:
        await runs.erase_kept(session, now + timedelta(days=6))
    assert await playground.account.ok("GET", f"/account/runs/{run_id}/activations") == activations
    async with playground.stack.services.ledger.write_sessions() as session:
        await runs.erase_kept(session, now + timedelta(days=7, seconds=1))
    assert await playground.account.ok("GET", f"/account/runs/{run_id}/activations") is None
    async with playground.stack.services.sessions() as session:
        assert (await session.exec(select(PlaygroundActivations).where(
            PlaygroundActivations.run_id == made.id))).first() is None

    # Deleted: gone at once, erased with its work row 14 days later.
    await playground.account.ok("DELETE", f"/account/runs/{run_id}")
    async with playground.stack.services.ledger.write_sessions() as session:
        await runs.erase_kept(session, utcnow() + timedelta(days=13))
        assert await session.get(PlaygroundRun, made.id) is not None
        await runs.erase_kept(session, utcnow() + timedelta(days=14, seconds=1))
    async with playground.stack.services.sessions() as session:
        assert await session.get(PlaygroundRun, made.id) is None
        assert await session.get(Work, made.work_id) is None


# -- pushed, not polled -----------------------------------------------------------------------------------------


@pytest.mark.fake(delay_s=0.05)
async def test_the_runner_tells_each_piece_of_text_and_each_committed_change_on_the_runs_topic(
        playground: Playground) -> None:
    run = await playground.one({**SKY, "max_tokens": 6, "n": 2})
    news = await playground.stack.services.feed.subscribe(run_topic(uuid.UUID(run["id"])))
    told: list[Any] = []

    async def listen() -> None:
        async for message in news:
            told.append(message)

    listening = asyncio.create_task(listen())
    try:
        playground.runner()
        await playground.wait(run["id"], "completed")
        await wait_until(lambda: bool(told) and told[-1] == CHANGED)
    finally:
        await news.aclose()
        await listening
    assert told[0] == CHANGED  # it started: read it
    texts = [message["texts"] for message in told if "texts" in message]
    assert texts[-1] == [fake_text(6), fake_text(6, 1100)] and len(texts) >= 6
    assert all(message["attempt"] == 1 and message["run_id"] == run["id"] for message in told if "texts" in message)


async def test_the_stream_is_pushed_each_piece_of_text_and_reads_the_ledger_when_told(
        playground: Playground) -> None:
    services = playground.stack.services
    user_id = playground.account.user_id
    new = NewRun(request={**SKY, "logprobs": 1}, model="llama-8b", model_id="llama-8b", served_model="llama-8b")
    async with services.ledger.write_sessions() as session:
        (made,) = await runs.create(session, user_id, [new], utcnow())
        await runs.start(session, made.id, 1, utcnow())
        # As a Runner's claim leaves its work row (no Runner runs here: the test grows the Run).
        await session.exec(update(Work).where(col(Work.id) == made.work_id)
                           .values(status=WorkStatus.running, attempts=1))
        await session.commit()
    updates = await stream.follow(services, user_id, [made.id])
    arrived: asyncio.Queue = asyncio.Queue()

    async def read_all() -> None:
        async for update in updates:
            arrived.put_nowait(update)
        arrived.put_nowait(DONE)

    async def next_update(timeout_s: float = 1.0) -> Any:
        return await asyncio.wait_for(arrived.get(), timeout_s)

    reading = asyncio.create_task(read_all())
    try:
        first = await next_update()
        assert (first["status"], first["choices"]) == ("running", [])
        topic = run_topic(made.id)
        await services.feed.publish(topic, TextsSoFar(made.id, 1, (" t1000",)).message())
        grown = await next_update()  # long before the stream's catch-up (2 s)
        assert grown["status"] == "running" and grown["choices"] == [
            {"index": 0, "text": " t1000", "logprobs": None, "finish_reason": None, "stop_reason": None,
             "prompt_logprobs": None}]
        # A cut attempt's late message, and a repeat, change nothing.
        await services.feed.publish(topic, TextsSoFar(made.id, 0, (" x",)).message())
        await services.feed.publish(topic, TextsSoFar(made.id, 1, (" t1000",)).message())
        with pytest.raises(TimeoutError):
            await next_update(0.3)
        # Its end, once committed: the stream reads the ledger, which has the last word.
        choice = {"index": 0, "text": " t1000 t1001", "logprobs": {"tokens": [" t1000", " t1001"]},
                  "finish_reason": "length", "stop_reason": None, "prompt_logprobs": None}
        usage = {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}
        async with services.ledger.write_sessions() as session:
            growth = RunGrowth(made.id, 1, "cmpl-1", [choice], usage)
            await runs.end_within(session, RunEnd(RunStatus.completed, growth), utcnow())
            await session.commit()
        await services.feed.publish(topic, CHANGED)
        done = await next_update()
        assert (done["status"], done["choices"], done["usage"]) == ("completed", [choice], usage)
        assert await next_update() == DONE  # nothing grows: the updates end
    finally:
        reading.cancel()
        await asyncio.gather(reading, return_exceptions=True)
        await updates.aclose()
    assert services.feed.subscribers(run_topic(made.id)) == 0  # the stream left its topic


@pytest.mark.fake(delay_s=0.02)
async def test_stop_all_stops_a_group_whose_runs_are_running_and_each_pays_what_it_grew(
        playground: Playground) -> None:
    answer = await playground.start(*[{**SKY, "max_tokens": 400, "seed": seed} for seed in range(6)])
    started = answer["runs"]
    playground.runner()
    for run in started:
        await playground.wait(run["id"], "running", text=True)
    stopped = await playground.account.ok("POST", f"/account/runs/groups/{started[0]['group_id']}/stop")
    assert [run["status"] for run in stopped["data"]] == ["stopped"] * 6
    for run in stopped["data"]:
        assert text_of(run) and fake_text(400).startswith(text_of(run))
        (hold,) = await playground.run_holds(run["id"])
        assert (hold.state, hold.used) == (HoldState.settled, run["used_tokens"])
