"""Jobs on the fake engine with in-process Runners on PostgreSQL: the routes to
the letter of the spec, the caps, the order of the work, Holds, cancels,
restarts (a planned stop and a crash found by its lease), paused, revoked and
suspended keys. The real engine and a Runner in its own process are in
test_e2e_jobs.py."""
from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import time
import uuid
from datetime import timedelta
from typing import Any, AsyncIterator

import pytest
import pytest_asyncio
from sqlalchemy import delete, update
from sqlmodel import select

from cluster.composition import build_runner, compose
from deployments.background.runner import Runner
from domain.feeds import Feed
from ledger.store.coltypes import utcnow
from ledger.tokens.grants import set_allowance
from ledger.accounts.keys import Principal, authenticate, set_key_status, set_standing
from ledger.accounts.tables import KeyStatus, Standing, User
from ledger.tokens.tables import Hold, HoldState
from ledger.work.tables import Harvest, Work, WorkStatus
from ledger.tokens.spend import set_spend_stop
from tests.spec import assert_error, validate
from tests.accounts import another_key, left, principal
from tests.waiting import wait_until

# The claim's locks (FOR UPDATE SKIP LOCKED across Runner replicas) are PostgreSQL's.
pytestmark = pytest.mark.postgres

SKY = {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2}
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$")
FAST = dict(runner_lease_s=1.0, runner_poll_s=0.05, runner_grace_s=0.5)


@dataclasses.dataclass
class Jobs:
    """The fake stack with its work table empty, and Runners to start."""

    stack: Any
    runners: list[Runner]

    def runner(self, feed: Feed | None = None, **settings: Any) -> Runner:
        """A Runner of its own process identity (its own leases and Holds); `feed` its own, where a
        test joins it to the routes through Redis as another process's would be."""
        base = self.stack.services
        config = base.settings.model_copy(update={**FAST, **settings})
        clients = {model_id: gateway.client for model_id, gateway in base.gateways.items()}
        # Its feed is the routes' own, as Redis joins a Runner's replica to the ingress's.
        services = compose(config, base.catalog, clients, base.sessions.kw["bind"], tokenizers=base.tokenizers,
                           counts=base.counts, feed=feed or base.feed)
        # The models' places and breakers are the ingress's own: one process in tests.
        runner = build_runner(dataclasses.replace(services, gateways=base.gateways))
        runner.start()
        self.runners.append(runner)
        return runner

    async def submit(self, body: dict | None = None, key: str | None = None, **headers: str) -> Any:
        auth = {"Authorization": f"Bearer {key or self.stack.key}"}
        return await self.stack.http.post("/v1/completion-jobs", json=body or SKY, headers={**auth, **headers})

    async def get(self, job_id: str, tail: str = "", key: str | None = None, method: str = "GET") -> Any:
        auth = {"Authorization": f"Bearer {key or self.stack.key}"}
        return await self.stack.http.request(method, f"/v1/completion-jobs/{job_id}{tail}", headers=auth)

    async def wait(self, job_id: str, *statuses: str, timeout_s: float = 10.0, key: str | None = None) -> dict:
        deadline = time.monotonic() + timeout_s
        while True:
            r = await self.get(job_id, key=key)
            assert r.status_code == 200, r.text
            job = r.json()
            if job["status"] in statuses:
                return job
            assert time.monotonic() < deadline, f"job still {job['status']}, not {statuses}"
            await asyncio.sleep(0.1)

    async def rows(self) -> list[Work]:
        async with self.stack.services.sessions() as session:
            return list((await session.exec(select(Work))).all())

    async def holds(self, request_id: str) -> list[Any]:
        async with self.stack.services.sessions() as session:
            return list((await session.exec(select(Hold).where(Hold.request_id.startswith(request_id)))).all())


@pytest_asyncio.fixture
async def jobs(fake_stack: Any) -> AsyncIterator[Jobs]:
    async with fake_stack.services.ledger.write_sessions() as session:
        await session.exec(delete(Harvest))  # a harvest's row refers to its work row
        await session.exec(delete(Work))
        await session.commit()
    state = Jobs(fake_stack, [])
    yield state
    for runner in state.runners:
        await runner.stop()


async def who_holds(stack: Any, key: str) -> Principal:
    """The User and key behind a raw key."""
    async with stack.services.sessions() as session:
        return await authenticate(session, f"Bearer {key}")


# -- submit, read, result ------------------------------------------------------------------------------


async def test_a_nudge_starts_a_job_at_once_where_the_poll_would_wait(jobs: Jobs) -> None:
    """The Runner's poll is only the fallback: the route that queued the work wakes the Runner."""
    runner = jobs.runner(runner_poll_s=3600)
    await asyncio.sleep(0.3)  # its first poll, of an empty queue, is over: the next is an hour away
    unannounced = (await jobs.submit()).json()
    await asyncio.sleep(0.5)
    assert (await jobs.get(unannounced["id"])).json()["status"] == "queued"

    jobs.stack.replace_services(wake_runner=runner.wake)  # the routes now ring that Runner
    announced = (await jobs.submit()).json()
    await jobs.wait(announced["id"], "succeeded", timeout_s=5)
    # The claim takes the oldest first, and each attempt's end wakes it again: both ran.
    await jobs.wait(unannounced["id"], "succeeded", timeout_s=5)


async def test_submit_poll_and_fetch_the_result(jobs: Jobs) -> None:
    r = await jobs.submit()
    assert r.status_code == 202, r.text
    job = r.json()
    validate(job, "CompletionJob")
    assert r.headers["location"] == job["status_url"] == f"/v1/completion-jobs/{job['id']}"
    assert job["result_url"] == f"/v1/completion-jobs/{job['id']}/result"
    assert uuid.UUID(job["id"]).version == 7
    assert job["request_id"] == "req_job_" + job["id"].replace("-", "")
    assert (job["status"], job["model"], job["started_at"], job["finished_at"], job["expires_at"]) == (
        "queued", "llama-8b", None, None, None)
    assert ISO.match(job["created_at"]) and job["usage_pending"] is False and job["result_expired"] is False
    waiting = await jobs.get(job["id"], "/result")
    assert waiting.status_code == 202 and waiting.headers["retry-after"] == "1"
    validate(waiting.json(), "CompletionJob")

    jobs.runner()
    done = await jobs.wait(job["id"], "succeeded")
    assert all(ISO.match(done[k]) for k in ("created_at", "started_at", "finished_at", "expires_at"))
    assert done["usage_pending"] is False
    result = await jobs.get(job["id"], "/result")
    assert result.status_code == 200
    validate(result.json(), "Completion")
    assert result.json()["usage"] == {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}
    (hold,) = await jobs.holds(job["request_id"])
    assert (hold.state, hold.used, hold.source.value) == (HoldState.settled, 6, "job")


async def test_a_job_of_zero_max_tokens_counts_one_token(jobs: Jobs) -> None:
    """The spec: a max_tokens of 0 counts as 1; the Job succeeds, and its text leaves the token out."""
    job = (await jobs.submit({**SKY, "max_tokens": 0})).json()
    jobs.runner()
    await jobs.wait(job["id"], "succeeded")
    result = (await jobs.get(job["id"], "/result")).json()
    assert result["choices"][0]["text"] == "" and result["choices"][0]["finish_reason"] == "length"
    assert result["usage"] == {"prompt_tokens": 4, "completion_tokens": 1, "total_tokens": 5}


async def test_a_job_holds_nothing_while_queued_and_keeps_max_tokens_16(jobs: Jobs) -> None:
    before = (await left(jobs.stack)).allowance_used
    job = (await jobs.submit({"model": "llama-8b", "prompt": "The sky is"})).json()
    assert (await left(jobs.stack)).allowance_used == before
    jobs.runner()
    await jobs.wait(job["id"], "succeeded")
    (hold,) = await jobs.holds(job["request_id"])
    assert hold.tokens == 4 + 16  # the prompt and the Job's default max_tokens
    assert (await jobs.get(job["id"], "/result")).json()["usage"]["completion_tokens"] == 16


async def test_a_job_that_cannot_be_held_when_it_runs_fails_with_budget_exceeded(jobs: Jobs) -> None:
    """It never lowers max_tokens: the smallest request fits at submit, the Hold does not."""
    who = await principal(jobs.stack)
    async with jobs.stack.services.ledger.write_sessions() as session:
        await set_allowance(session, who.user_id, 30)
    job = (await jobs.submit({**SKY, "max_tokens": 100})).json()
    jobs.runner()
    failed = await jobs.wait(job["id"], "failed")
    assert failed["finished_at"] is not None
    result = await jobs.get(job["id"], "/result")
    assert_error(result, 429, "budget_exceeded", message=re.compile(r"^This request can use up to 104 tokens"),
                 request_id=job["request_id"])


async def test_submit_refuses_what_post_completions_refuses(jobs: Jobs) -> None:
    assert_error(await jobs.submit({**SKY, "stream": True}), 400, "invalid_request", param="stream",
                 message="Invalid value for 'stream': expected false.")
    assert_error(await jobs.submit({"prompt": "The sky is"}), 400, "invalid_request", param="model",
                 message="Missing required parameter: 'model'.")
    assert_error(await jobs.submit({**SKY, "model": "gpt-4"}), 400, "model_not_found", param="model")
    assert_error(await jobs.submit({**SKY, "max_tokens": "2"}), 400, "invalid_request", param="max_tokens")
    assert_error(await jobs.submit({**SKY, "output_residual_stream": [9]}), 400, "invalid_request",
                 param="output_residual_stream")
    assert await jobs.rows() == []


async def test_submit_refuses_when_not_even_the_smallest_request_fits(jobs: Jobs) -> None:
    who = await principal(jobs.stack)
    async with jobs.stack.services.ledger.write_sessions() as session:
        await set_allowance(session, who.user_id, 4)
    r = await jobs.submit()
    assert_error(r, 429, "budget_exceeded", headers={"x-should-retry": "false"},
                 message=re.compile(r"^This request can use up to 5 tokens, more than your monthly allowance"))
    assert await jobs.rows() == []


async def test_submit_during_the_spend_stop_is_429_and_queued_work_waits(jobs: Jobs) -> None:
    job = (await jobs.submit()).json()
    async with jobs.stack.services.ledger.write_sessions() as session:
        await set_spend_stop(session, True, "test")
    await asyncio.sleep(1.1)  # the API reads the stop at most once a second
    try:
        assert_error(await jobs.submit(), 429, "spend_cap", headers={"Retry-After": "3600", "x-should-retry": "false"})
        jobs.runner()
        await asyncio.sleep(1.2)  # the Runner reads the stop at most once a second
        assert (await jobs.get(job["id"])).json()["status"] == "queued"
    finally:
        async with jobs.stack.services.ledger.write_sessions() as session:
            await set_spend_stop(session, False)
    await jobs.wait(job["id"], "succeeded")


async def test_ids_of_others_and_ids_that_are_not_uuids(jobs: Jobs) -> None:
    job = (await jobs.submit()).json()
    stranger = await another_key(jobs.stack, same_user=False)
    for tail in ("", "/result"):
        assert_error(await jobs.get(job["id"], tail, key=stranger), 404, "job_not_found",
                     message=f"None of your Jobs has the id {job['id']}.")
    assert_error(await jobs.get(job["id"], "/cancel", key=stranger, method="POST"), 404, "job_not_found")
    assert (await jobs.get(job["id"], key=await another_key(jobs.stack))).status_code == 200  # any key of the User
    assert_error(await jobs.get("not-a-uuid"), 400, "invalid_request", param="job_id")
    assert_error(await jobs.get(str(uuid.uuid4())), 404, "job_not_found")


# -- Idempotency-Key --------------------------------------------------------------------------------------


async def test_the_same_key_answers_the_job_as_it_is_now(jobs: Jobs) -> None:
    first = await jobs.submit(**{"Idempotency-Key": "sky-001"})
    assert first.status_code == 202
    jobs.runner()
    await jobs.wait(first.json()["id"], "succeeded")
    again = await jobs.submit(**{"Idempotency-Key": "sky-001"})
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"] and again.json()["status"] == "succeeded"
    assert len(await jobs.rows()) == 1
    assert len(await jobs.holds(first.json()["request_id"])) == 1  # ran once
    assert_error(await jobs.submit({**SKY, "max_tokens": 3}, **{"Idempotency-Key": "sky-001"}), 409,
                 "idempotency_conflict", headers={"x-should-retry": "false"})


# -- the caps ----------------------------------------------------------------------------------------------


async def test_eight_jobs_of_one_key(jobs: Jobs) -> None:
    for _ in range(8):
        assert (await jobs.submit()).status_code == 202
    assert_error(await jobs.submit(), 429, "job_capacity", headers={"x-should-retry": "false"}, message=(
        "This API key has 8 Jobs queued or running, the most that one key may have. "
        "Submit again when one of them ends."))
    assert (await jobs.submit(key=await another_key(jobs.stack))).status_code == 202  # another key of the User


async def test_thirty_two_jobs_of_one_user_and_128_in_all(jobs: Jobs) -> None:
    for _ in range(4):
        key = await another_key(jobs.stack)
        for _ in range(8):
            assert (await jobs.submit(key=key)).status_code == 202
    assert_error(await jobs.submit(key=await another_key(jobs.stack)), 429, "job_capacity", message=(
        "You have 32 Jobs queued or running, the most that one User may have. Submit again when one of them ends."))
    for _ in range(12):
        key = await another_key(jobs.stack, same_user=False)
        for _ in range(8):
            assert (await jobs.submit(key=key)).status_code == 202
    assert_error(await jobs.submit(key=await another_key(jobs.stack, same_user=False)), 429, "job_capacity",
                 headers={"x-should-retry": "false"}, message=(
                     "128 Jobs of all Users are queued or running, the most that the API takes. "
                     "Submit again in a few minutes."))


async def _ended(jobs: Jobs, count: int, user_id: uuid.UUID, key_id: uuid.UUID, expires_in: timedelta) -> None:
    now = utcnow()
    async with jobs.stack.services.ledger.write_sessions() as session:
        for _ in range(count):
            session.add(Work(kind="job", user_id=user_id, key_id=key_id, model="llama-8b", model_id="tiny-llama",
                             request="{}",
                             request_id="req_job_x", status=WorkStatus.succeeded, result_status=200,
                             result_body="{}", finished_at=now, result_expires_at=now + expires_in))
        await session.commit()


async def test_kept_results_cap_per_user_and_in_all(jobs: Jobs) -> None:
    who = await principal(jobs.stack)
    await _ended(jobs, 100, who.user_id, who.key_id, timedelta(days=30))
    await _ended(jobs, 50, who.user_id, who.key_id, -timedelta(seconds=1))  # expired: they free their place
    assert_error(await jobs.submit(), 429, "job_capacity", headers={"x-should-retry": "false"}, message=(
        "The API keeps the results of 100 of your ended Jobs, the most it keeps for one User. "
        "Submit again when one of those results expires, 30 days after its Job ended."))
    for _ in range(9):
        them = await who_holds(jobs.stack, await another_key(jobs.stack, same_user=False))
        await _ended(jobs, 100, them.user_id, them.key_id, timedelta(days=30))
    assert_error(await jobs.submit(key=await another_key(jobs.stack, same_user=False)), 429, "job_capacity", message=(
        "The API keeps the results of 1000 ended Jobs of all Users, the most it keeps. "
        "Submit again when one of those results expires."))


# -- the result route ----------------------------------------------------------------------------------------


async def test_an_expired_result_is_410_and_the_job_stays(jobs: Jobs) -> None:
    job = (await jobs.submit()).json()
    jobs.runner(runner_housekeeping_s=0.2)
    await jobs.wait(job["id"], "succeeded")
    async with jobs.stack.services.ledger.write_sessions() as session:
        await session.exec(update(Work).where(Work.id == uuid.UUID(job["id"]))
                           .values(result_expires_at=utcnow() - timedelta(seconds=1)))
        await session.commit()
    assert_error(await jobs.get(job["id"], "/result"), 410, "job_result_expired",
                 message="The result of this Job expired 30 days after the Job ended. The Job itself stays.")
    stays = (await jobs.get(job["id"])).json()
    assert (stays["status"], stays["result_expired"]) == ("succeeded", True)
    async def body_dropped() -> bool:  # by the Runner's housekeeping, every 0.2 s here; the Job stays
        (row,) = await jobs.rows()
        assert row.status == WorkStatus.succeeded
        return row.result_body is None

    await wait_until(body_dropped)
    assert (await jobs.get(job["id"], "/result")).status_code == 410


@pytest.mark.fake(fail_before_first=RuntimeError("boom"))
async def test_a_failed_completion_is_its_own_error_with_the_jobs_request_id(jobs: Jobs) -> None:
    job = (await jobs.submit()).json()
    jobs.runner()
    await jobs.wait(job["id"], "failed")
    result = await jobs.get(job["id"], "/result")
    assert_error(result, 502, "upstream_server_error", request_id=job["request_id"])
    (hold,) = await jobs.holds(job["request_id"])
    assert hold.state == HoldState.released  # failed before a token: costs nothing


@pytest.mark.fake(first_delay_s=1.0)
@pytest.mark.settings(engine_timeout_s=0.3, long_wait_s=5.0)
async def test_a_job_waits_for_inferences_answer_past_the_apis_wait(jobs: Jobs) -> None:
    """POST /v1/completions gives up after the API's wait (14 minutes; 0.3 s here);
    a Job waits up to ACS_BACKGROUND_ANSWER_WAIT_S (45 minutes) for the answer to start."""
    r = await jobs.stack.http.post("/v1/completions", headers=jobs.stack.auth(), json=SKY)
    assert_error(r, 504, "upstream_deadline")
    patient = (await jobs.submit()).json()
    jobs.runner(background_answer_wait_s=5.0)
    assert (await jobs.wait(patient["id"], "succeeded", "failed"))["status"] == "succeeded"
    assert (await jobs.get(patient["id"], "/result")).json()["usage"]["completion_tokens"] == 2


@pytest.mark.fake(first_delay_s=1.0)
@pytest.mark.settings(engine_timeout_s=5.0)
async def test_a_job_whose_answer_does_not_start_in_time_fails_with_504(jobs: Jobs) -> None:
    job = (await jobs.submit()).json()
    jobs.runner(background_answer_wait_s=0.3)
    await jobs.wait(job["id"], "failed")
    assert_error(await jobs.get(job["id"], "/result"), 504, "upstream_deadline", request_id=job["request_id"])


async def test_a_job_the_api_fails_to_run_is_500_job_failed(jobs: Jobs, monkeypatch: Any) -> None:
    async def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise KeyError("a bug")

    monkeypatch.setattr("domain.completions.service.CompletionService.run_in_background", broken)
    job = (await jobs.submit()).json()
    jobs.runner()
    await jobs.wait(job["id"], "failed")
    assert_error(await jobs.get(job["id"], "/result"), 500, "job_failed", request_id=job["request_id"],
                 message="The API failed to run this Job or to keep its result. It does not run the Job again.")


# -- cancel -----------------------------------------------------------------------------------------------------


async def test_cancel_a_queued_job(jobs: Jobs) -> None:
    job = (await jobs.submit()).json()
    r = await jobs.get(job["id"], "/cancel", method="POST")
    assert r.status_code == 200
    validate(r.json(), "CompletionJob")
    assert (r.json()["status"], r.json()["cancel_requested"]) == ("cancelled", True)
    assert ISO.match(r.json()["finished_at"]) and ISO.match(r.json()["expires_at"])
    assert_error(await jobs.get(job["id"], "/result"), 409, "job_cancelled", headers={"x-should-retry": "false"})
    assert await jobs.holds(job["request_id"]) == []
    jobs.runner()
    await asyncio.sleep(0.3)
    assert (await jobs.get(job["id"])).json()["status"] == "cancelled"  # never runs


@pytest.mark.fake(delay_s=0.05)
async def test_cancel_a_running_job_pays_its_whole_hold(jobs: Jobs) -> None:
    job = (await jobs.submit({**SKY, "max_tokens": 2000})).json()
    jobs.runner()
    await jobs.wait(job["id"], "running")
    while not await jobs.holds(job["request_id"]):
        await asyncio.sleep(0.02)
    cancelled = (await jobs.get(job["id"], "/cancel", method="POST")).json()
    assert (cancelled["status"], cancelled["usage_pending"]) == ("cancelled", False)
    (hold,) = await jobs.holds(job["request_id"])
    assert (hold.state, hold.used, hold.counting.value) == (HoldState.settled, 4 + 2000, "held")
    # The Runner sees the cancel at its next watch (0.25 s) and stops the request.
    await wait_until(lambda: not jobs.runners[0].attempts)
    again = (await jobs.get(job["id"], "/cancel", method="POST")).json()
    assert again == cancelled  # a cancel of an ended Job changes nothing


async def test_cancel_of_an_ended_job_changes_nothing(jobs: Jobs) -> None:
    job = (await jobs.submit()).json()
    jobs.runner()
    done = await jobs.wait(job["id"], "succeeded")
    assert (await jobs.get(job["id"], "/cancel", method="POST")).json() == done
    assert (await jobs.get(job["id"], "/result")).status_code == 200


# -- the order of the work --------------------------------------------------------------------------------------


@pytest.mark.fake(delay_s=0.02)
async def test_a_user_with_nothing_running_goes_first(jobs: Jobs) -> None:
    a = [(await jobs.submit({**SKY, "max_tokens": 10})).json() for _ in range(8)]
    a += [(await jobs.submit({**SKY, "max_tokens": 10}, key=await another_key(jobs.stack))).json() for _ in range(2)]
    b_key = await another_key(jobs.stack, same_user=False)
    b = (await jobs.submit({**SKY, "max_tokens": 10}, key=b_key)).json()
    jobs.runner()
    for job in a:
        await jobs.wait(job["id"], "succeeded", timeout_s=30)
    await jobs.wait(b["id"], "succeeded", key=b_key)
    started = {row.id: row.started_at for row in await jobs.rows()}
    order = sorted(started, key=started.get)
    # A's oldest starts first; then A has a Job running and B none, so B's starts
    # next, before A's nine others, which then start oldest first.
    assert order == [uuid.UUID(a[0]["id"]), uuid.UUID(b["id"])] + [uuid.UUID(j["id"]) for j in a[1:]]


@pytest.mark.fake(delay_s=0.05)
async def test_at_most_four_jobs_run_at_once_across_runners(jobs: Jobs) -> None:
    keys = [await another_key(jobs.stack, same_user=False) for _ in range(3)]
    for key in keys:
        for _ in range(3):
            await jobs.submit({**SKY, "max_tokens": 6}, key=key)
    jobs.runner(), jobs.runner()
    most = 0
    while any(row.status != WorkStatus.succeeded for row in await jobs.rows()):
        most = max(most, sum(row.status == WorkStatus.running for row in await jobs.rows()))
        await asyncio.sleep(0.02)
    assert most == 4


# -- restarts -----------------------------------------------------------------------------------------------------


@pytest.mark.fake(delay_s=0.05)
async def test_a_planned_stop_queues_running_work_again_and_it_is_charged_once(jobs: Jobs) -> None:
    job = (await jobs.submit({**SKY, "max_tokens": 200})).json()
    first = jobs.runner(runner_grace_s=0.1)
    await jobs.wait(job["id"], "running")
    while not await jobs.holds(job["request_id"]):
        await asyncio.sleep(0.02)
    await first.stop()
    jobs.runners.remove(first)
    queued = (await jobs.get(job["id"])).json()
    assert (queued["status"], queued["usage_pending"]) == ("queued", False)
    (released,) = await jobs.holds(job["request_id"])
    assert (released.state, released.used) == (HoldState.released, 0)
    jobs.runner()
    done = await jobs.wait(job["id"], "succeeded", timeout_s=30)
    assert done["started_at"] == queued["started_at"]  # when the API first started it
    holds = await jobs.holds(job["request_id"])
    assert sorted(h.state.value for h in holds) == ["released", "settled"]
    assert sum(h.used for h in holds) == 204


async def _crash(runner: Runner) -> None:
    """Like kill -9: its loops and requests stop, nothing is written, its leases lapse."""
    for task in runner._loops + list(runner.attempts.values()):
        task.cancel()
    await asyncio.gather(*runner._loops, *runner.attempts.values(), return_exceptions=True)
    await runner.ledger.leases.stop()


@pytest.mark.fake(delay_s=0.05)
async def test_a_crashed_runners_job_runs_again_after_its_lease_and_is_charged_once(jobs: Jobs) -> None:
    job = (await jobs.submit({**SKY, "max_tokens": 100})).json()
    dead = jobs.runner()
    await jobs.wait(job["id"], "running")
    while not await jobs.holds(job["request_id"]):
        await asyncio.sleep(0.02)
    await _crash(dead)
    jobs.runners.remove(dead)
    assert (await jobs.get(job["id"])).json()["status"] == "running"  # until its lease lapses
    jobs.runner()
    await jobs.wait(job["id"], "succeeded", timeout_s=30)
    holds = await jobs.holds(job["request_id"])
    assert sorted((h.state.value, h.used) for h in holds) == [("released", 0), ("settled", 104)]
    (row,) = await jobs.rows()
    assert row.attempts == 2


async def test_a_job_with_its_answer_never_runs_again(jobs: Jobs) -> None:
    job = (await jobs.submit()).json()
    runner = jobs.runner()
    await jobs.wait(job["id"], "succeeded")
    await _crash(runner)
    jobs.runners.remove(runner)
    jobs.runner()
    await asyncio.sleep(1.5)  # past the old lease
    (row,) = await jobs.rows()
    assert (row.status, row.attempts) == (WorkStatus.succeeded, 1)
    assert len(await jobs.holds(job["request_id"])) == 1


# -- paused, revoked, suspended ----------------------------------------------------------------------------------


async def _key_status(jobs: Jobs, key_id: uuid.UUID, status: KeyStatus) -> None:
    async with jobs.stack.services.ledger.write_sessions() as session:
        await set_key_status(session, key_id, status)
        await session.commit()


async def test_a_paused_keys_jobs_wait_and_run_on_resume(jobs: Jobs) -> None:
    key = await another_key(jobs.stack)
    job = (await jobs.submit(key=key)).json()
    key_id = (await who_holds(jobs.stack, key)).key_id
    await _key_status(jobs, key_id, KeyStatus.paused)
    jobs.runner()
    await asyncio.sleep(0.4)
    assert (await jobs.get(job["id"])).json()["status"] == "queued"  # read with another key of the User
    await _key_status(jobs, key_id, KeyStatus.active)
    await jobs.wait(job["id"], "succeeded")


async def test_a_revoked_keys_queued_job_fails_401_and_spends_nothing(jobs: Jobs) -> None:
    key = await another_key(jobs.stack)
    job = (await jobs.submit(key=key)).json()
    await _key_status(jobs, (await who_holds(jobs.stack, key)).key_id, KeyStatus.revoked)
    jobs.runner()
    await jobs.wait(job["id"], "failed")
    result = await jobs.get(job["id"], "/result")
    assert_error(result, 401, "invalid_api_key", message="This API key has been revoked.",
                 request_id=job["request_id"])
    assert await jobs.holds(job["request_id"]) == []


async def test_a_suspended_users_queued_job_fails_401_and_stays_failed(jobs: Jobs) -> None:
    key = await another_key(jobs.stack, same_user=False)
    job = (await jobs.submit(key=key)).json()
    who = await who_holds(jobs.stack, key)
    async with jobs.stack.services.ledger.write_sessions() as session:
        user = await session.get(User, who.user_id)
        await set_standing(session, user, Standing.suspended)
        await session.commit()
    jobs.runner()
    async with jobs.stack.services.sessions() as session:
        deadline = time.monotonic() + 10
        while (row := await session.get(Work, uuid.UUID(job["id"]), populate_existing=True)).status != WorkStatus.failed:
            assert time.monotonic() < deadline
            await session.rollback()
            await asyncio.sleep(0.05)
    assert json.loads(row.result_body)["error"]["code"] == "account_suspended"
    assert json.loads(row.result_body)["error"]["message"] == (
        "Your access to ACS Infra is suspended. Write to infra@acsresearch.org if you think this is a mistake.")
    async with jobs.stack.services.ledger.write_sessions() as session:
        user = await session.get(User, who.user_id)
        await set_standing(session, user, Standing.active)
        await session.commit()
    await asyncio.sleep(0.3)
    assert (await jobs.get(job["id"], key=key)).json()["status"] == "failed"  # it does not run again


# -- GET /health ------------------------------------------------------------------------------------------------


async def test_health_shows_the_runner_and_work_that_no_runner_takes(jobs: Jobs) -> None:
    from ledger.work.tables import WorkQueue

    async with jobs.stack.services.ledger.write_sessions() as session:
        await session.exec(update(WorkQueue).values(polled_at=None))
        await session.commit()
    job = (await jobs.submit()).json()
    health = (await jobs.stack.http.get("/health")).json()
    validate(health, "Health")
    assert health["wrapper"]["runners"] == [{"name": name, "running": 0, "seconds_since_poll": None}
                                            for name in ("harvests", "jobs", "nodes", "runs")]  # the kinds it runs
    assert (health["status"], health["degraded_reasons"]) == ("degraded", ["runner_stale:jobs"])
    jobs.runner()
    await jobs.wait(job["id"], "succeeded")
    health = (await jobs.stack.http.get("/health")).json()
    runner = {entry["name"]: entry for entry in health["wrapper"]["runners"]}["jobs"]
    assert runner["running"] == 0 and 0 <= runner["seconds_since_poll"] <= 1
    assert (health["status"], health["degraded_reasons"]) == ("ok", [])


# -- a place at the model ------------------------------------------------------------------------------------------


async def test_background_work_waits_for_a_place_where_a_request_gets_503() -> None:
    from domain import errors
    from domain.inference.gateway import ModelGateway
    from tests.fakes import FakeEngine

    gateway = ModelGateway("tiny-llama", FakeEngine(), chunk_timeout_s=5, max_in_flight=1)
    async with gateway.admitted():
        with pytest.raises(errors.CircuitOpen):
            async with gateway.admitted():
                pass
        job = gateway.admitted(wait=True)
        waiting = asyncio.create_task(job.__aenter__())
        await asyncio.sleep(0.05)
        assert not waiting.done()  # the Job waits while the place is taken
    await asyncio.wait_for(waiting, 1)
    assert gateway.in_flight == 1  # then it has the place
    await job.__aexit__(None, None, None)
    assert gateway.in_flight == 0
