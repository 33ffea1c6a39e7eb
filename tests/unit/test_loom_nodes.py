"""Loom Nodes on the Runner, on the fake engine with in-process Runners on PostgreSQL:
a Node's text grows while it runs, its end (completed, failed, cancelled), its Hold,
restarts, and the order of the Nodes (spec: "Grow a Loom with the API",
"Holds of background work", "Work in the background").

The fake engine writes tokens " t1000", " t1001", ...; "The sky is" is 4 tokens."""
from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import time
import uuid
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy import delete
from sqlmodel import select

from deployments.engine import EngineRefused
from ledger.tokens.grants import set_allowance
from ledger.accounts.keys import set_key_status, set_standing
from ledger.accounts.tables import KeyStatus, Standing, User
from ledger.tokens.tables import Hold, HoldState
from ledger.work.tables import LoomNode, Work, WorkKind, WorkStatus
from tests.accounts import another_key, principal
from tests.spec import validate
from tests.unit.test_jobs import Jobs, _crash, jobs, who_holds  # noqa: F401 - jobs: the fixture
from tests.waiting import wait_until

pytestmark = pytest.mark.postgres

SKY = "The sky is"
BRANCH = {"model": "llama-8b", "max_tokens": 2}


def fake_text(count: int, first: int = 1000) -> str:
    return "".join(f" t{first + i}" for i in range(count))


@dataclasses.dataclass
class Looms(Jobs):
    """The Jobs' fake stack and Runners, with the Loom routes."""

    async def make(self, prompt: str = SKY, key: str | None = None) -> tuple[str, str]:
        """A new Loom: its id and its root's."""
        r = await self.stack.http.post("/v1/looms", json={"prompt": prompt}, headers=self._auth(key))
        assert r.status_code == 200, r.text
        return r.json()["id"], r.json()["nodes"][0]["id"]

    async def branch(self, loom_id: str, node_id: str, body: dict | None = None, key: str | None = None) -> list[dict]:
        r = await self.stack.http.post(f"/v1/looms/{loom_id}/nodes/{node_id}/branch", json=body or BRANCH,
                                       headers=self._auth(key))
        assert r.status_code == 200, r.text
        return r.json()["data"]

    async def grow(self, body: dict | None = None, prompt: str = SKY, key: str | None = None) -> tuple[str, dict]:
        """A new Loom and one Branch under its root: the Loom's id and the (first) new Node."""
        loom_id, root_id = await self.make(prompt, key)
        return loom_id, (await self.branch(loom_id, root_id, body, key))[0]

    async def read(self, loom_id: str, key: str | None = None) -> dict:
        r = await self.stack.http.get(f"/v1/looms/{loom_id}", headers=self._auth(key))
        assert r.status_code == 200, r.text
        validate(r.json(), "Loom")
        return r.json()

    async def node(self, loom_id: str, node_id: str, key: str | None = None) -> dict:
        (node,) = [n for n in (await self.read(loom_id, key))["nodes"] if n["id"] == node_id]
        return node

    async def wait(self, loom_id: str, node_id: str, *statuses: str, timeout_s: float = 10.0,
                   key: str | None = None, text: bool = False) -> dict:
        """The Node once it is in one of `statuses` (and, with `text`, has some)."""
        deadline = time.monotonic() + timeout_s
        while True:
            node = await self.node(loom_id, node_id, key)
            if node["status"] in statuses and (node["text"] or not text):
                return node
            assert time.monotonic() < deadline, f"node still {node['status']} {node['text']!r}, not {statuses}"
            await asyncio.sleep(0.02)

    async def stop(self, loom_id: str, key: str | None = None) -> dict:
        r = await self.stack.http.post(f"/v1/looms/{loom_id}/cancel", headers=self._auth(key))
        assert r.status_code == 200, r.text
        return r.json()

    async def node_holds(self, node_id: str) -> list[Hold]:
        return await self.holds(f"node-{uuid.UUID(node_id).hex}")

    async def node_rows(self) -> list[Work]:
        return [row for row in await self.rows() if row.kind == WorkKind.node]

    def _auth(self, key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key or self.stack.key}"}


@pytest_asyncio.fixture
async def looms(jobs: Jobs) -> Looms:
    """The Jobs' fixture (its work table empty, its Runners stopped at the end), without Nodes."""
    async with jobs.stack.services.ledger.write_sessions() as session:
        await session.exec(delete(LoomNode))
        await session.commit()
    return Looms(jobs.stack, jobs.runners)


# -- a Node grows ------------------------------------------------------------------------------------------


@pytest.mark.fake(delay_s=0.1)
async def test_a_nodes_text_grows_while_it_runs_and_ends_completed(looms: Looms) -> None:
    loom_id, node = await looms.grow({"model": "llama-8b", "max_tokens": 8, "logprobs": 1})
    looms.runner()
    running = await looms.wait(loom_id, node["id"], "running", text=True)
    assert fake_text(8).startswith(running["text"]) and running["text"] != fake_text(8)
    assert (running["logprobs"], running["error"]) == (None, None)
    done = await looms.wait(loom_id, node["id"], "completed")
    assert done["text"] == fake_text(8)
    assert done["request"] == node["request"] and done["error"] is None
    validate(done, "Node")
    logprobs = done["logprobs"]
    assert logprobs["tokens"] == [f" t{1000 + i}" for i in range(8)]
    assert logprobs["text_offset"] == [6 * i for i in range(8)]  # counted within the Node's own text
    assert len(logprobs["token_logprobs"]) == len(logprobs["top_logprobs"]) == 8
    assert all(len(top) == 2 for top in logprobs["top_logprobs"])  # logprobs 1: the top token and the chosen


@pytest.mark.fake(delay_s=0.15)
async def test_the_text_of_a_running_node_is_read_more_than_once_as_it_grows(looms: Looms) -> None:
    loom_id, node = await looms.grow({"model": "llama-8b", "max_tokens": 10})
    looms.runner()
    texts = []
    while (current := await looms.node(loom_id, node["id"]))["status"] != "completed":
        if current["status"] == "running" and current["text"] and current["text"] not in texts:
            texts.append(current["text"])
        await asyncio.sleep(0.03)
    assert len(texts) >= 3  # many reads, each a longer prefix
    assert all(fake_text(10).startswith(text) for text in texts) and texts == sorted(texts, key=len)


async def test_the_prompt_is_the_whole_path_and_the_sampling_fields_reach_inference(looms: Looms) -> None:
    loom_id, root_id = await looms.make()
    (first,) = await looms.branch(loom_id, root_id)
    looms.runner()
    await looms.wait(loom_id, first["id"], "completed")
    body = {"model": "llama-8b", "max_tokens": 3, "temperature": 0.5, "top_k": 5, "seed": 7, "stop": ["zz"]}
    (second,) = await looms.branch(loom_id, first["id"], body)
    done = await looms.wait(loom_id, second["id"], "completed")
    assert done["text"] == fake_text(3)
    request = looms.stack.engine.seen[-1]
    tokenizer = looms.stack.services.tokenizers.get(looms.stack.services.catalog.models["tiny-llama"])
    assert request.prompt_token_ids == tokenizer.encode(SKY + fake_text(2))  # the root and its child
    sampling = request.sampling
    assert (sampling.max_tokens, sampling.temperature, sampling.top_k, sampling.seed) == (3, 0.5, 5, 7)
    assert sampling.final_only is False  # a Node runs as a stream


async def test_a_branch_of_two_nodes_seeds_each_and_validates_as_the_spec(looms: Looms) -> None:
    loom_id, root_id = await looms.make()
    nodes = await looms.branch(loom_id, root_id, {"model": "llama-8b", "max_tokens": 2, "n": 2, "logprobs": 1,
                                                  "seed": 100})
    looms.runner()
    for node in nodes:
        await looms.wait(loom_id, node["id"], "completed")
    seeds = sorted(request.sampling.seed for request in looms.stack.engine.seen)
    assert seeds == [100, 101]
    loom = await looms.read(loom_id)
    assert [n["text"] for n in loom["nodes"]] == [SKY, fake_text(2), fake_text(2)]
    assert loom["nodes"][1]["logprobs"]["text_offset"] == [0, 6]


# -- its Hold ----------------------------------------------------------------------------------------------


async def test_a_node_holds_nothing_while_queued_and_settles_its_hold_to_the_usage(looms: Looms) -> None:
    loom_id, node = await looms.grow({"model": "llama-8b", "max_tokens": 5})
    await asyncio.sleep(0.2)
    assert await looms.node_holds(node["id"]) == []  # no Runner yet: queued, nothing held
    looms.runner()
    await looms.wait(loom_id, node["id"], "completed")
    (hold,) = await looms.node_holds(node["id"])
    assert (hold.state, hold.tokens, hold.used, hold.source.value, hold.counting.value) == (
        HoldState.settled, 4 + 5, 4 + 5, "loom", "reported")
    (row,) = await looms.node_rows()
    assert (row.status, row.attempts, row.hold_id) == (WorkStatus.succeeded, 1, hold.id)


@pytest.mark.fake(eos_after=2)
async def test_a_node_that_ends_early_gives_back_the_rest_of_its_hold(looms: Looms) -> None:
    loom_id, node = await looms.grow({"model": "llama-8b", "max_tokens": 50})
    looms.runner()
    assert (await looms.wait(loom_id, node["id"], "completed"))["text"] == fake_text(2)
    (hold,) = await looms.node_holds(node["id"])
    assert (hold.tokens, hold.used) == (4 + 50, 4 + 2)


# -- a failed Node ------------------------------------------------------------------------------------------


async def test_a_node_that_its_tokens_cannot_hold_fails_with_budget_exceeded_before_inference(looms: Looms) -> None:
    who = await principal(looms.stack)
    async with looms.stack.services.ledger.write_sessions() as session:
        await set_allowance(session, who.user_id, 30)  # the smallest request fits, 4 + 100 does not
    loom_id, node = await looms.grow({"model": "llama-8b", "max_tokens": 100})
    looms.runner()
    failed = await looms.wait(loom_id, node["id"], "failed")
    validate(failed, "Node")
    assert failed["text"] == "" and failed["logprobs"] is None
    error = failed["error"]
    assert (error["code"], error["type"]) == ("budget_exceeded", "invalid_request_error")
    assert re.match(r"^This request can use up to 104 tokens", error["message"])
    assert "request_id" not in error
    assert looms.stack.engine.seen == []  # it never reached Inference
    assert await looms.node_holds(node["id"]) == []


async def test_a_path_longer_than_the_context_fails_with_context_length_exceeded_and_param_null(looms: Looms) -> None:
    loom_id, node = await looms.grow({"model": "llama-8b", "max_tokens": 16}, prompt=SKY + " a" * 2040)
    looms.runner()
    failed = await looms.wait(loom_id, node["id"], "failed")
    validate(failed, "Node")
    assert (failed["error"]["code"], failed["error"]["param"]) == ("context_length_exceeded", None)
    assert "request_id" not in failed["error"] and "retryable" not in failed["error"]
    assert looms.stack.engine.seen == []


@pytest.mark.fake(delay_s=0.02, fail_after_tokens=3)
async def test_inference_failing_mid_stream_keeps_the_text_before_it_and_pays_what_it_sent(looms: Looms) -> None:
    loom_id, node = await looms.grow({"model": "llama-8b", "max_tokens": 10, "logprobs": 0})
    looms.runner()
    failed = await looms.wait(loom_id, node["id"], "failed")
    validate(failed, "Node")
    assert failed["text"] == fake_text(3) and failed["logprobs"] is None
    error = failed["error"]
    assert error["type"] == "upstream_error" and error["retryable"] is False  # as a stream's error event
    assert "request_id" not in error
    (hold,) = await looms.node_holds(node["id"])
    assert (hold.state, hold.used, hold.counting.value) == (HoldState.settled, 4 + 3, "partial")


@pytest.mark.fake(fail_before_first=EngineRefused("top_k must be at most 50.", "top_k"))
async def test_inferences_refusal_names_the_branch_field(looms: Looms) -> None:
    loom_id, node = await looms.grow({"model": "llama-8b", "max_tokens": 2, "top_k": 60})
    looms.runner()
    failed = await looms.wait(loom_id, node["id"], "failed")
    error = failed["error"]
    assert (error["code"], error["param"]) == ("invalid_request", "top_k")
    assert error["message"] == "top_k must be at most 50."
    (hold,) = await looms.node_holds(node["id"])
    assert hold.state == HoldState.released  # refused before a token: it costs nothing


@pytest.mark.fake(fail_before_first=EngineRefused("This prompt is refused.", "prompt"))
async def test_a_refusal_of_the_prompt_has_param_null(looms: Looms) -> None:
    loom_id, node = await looms.grow()
    looms.runner()
    assert (await looms.wait(loom_id, node["id"], "failed"))["error"]["param"] is None


async def test_a_node_the_api_fails_to_run_fails_and_costs_nothing(looms: Looms, monkeypatch: Any) -> None:
    async def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise KeyError("a bug")

    monkeypatch.setattr("domain.completions.service.CompletionService.stream_in_background", broken)
    loom_id, node = await looms.grow()
    looms.runner()
    failed = await looms.wait(loom_id, node["id"], "failed")
    validate(failed, "Node")
    assert (failed["error"]["code"], failed["error"]["type"], failed["error"]["param"]) == (
        "internal_error", "internal_error", None)
    (row,) = await looms.node_rows()
    assert row.status == WorkStatus.failed


async def test_a_revoked_keys_queued_node_fails_with_invalid_api_key_and_spends_nothing(looms: Looms) -> None:
    key = await another_key(looms.stack)
    loom_id, node = await looms.grow(key=key)
    async with looms.stack.services.ledger.write_sessions() as session:
        await set_key_status(session, (await who_holds(looms.stack, key)).key_id, KeyStatus.revoked)
        await session.commit()
    looms.runner()
    failed = await looms.wait(loom_id, node["id"], "failed")  # read with the stack's key, the same User
    validate(failed, "Node")
    assert failed["text"] == ""
    assert (failed["error"]["code"], failed["error"]["message"], failed["error"]["param"]) == (
        "invalid_api_key", "This API key has been revoked.", None)
    assert looms.stack.engine.seen == [] and await looms.node_holds(node["id"]) == []
    (row,) = await looms.node_rows()
    assert (row.status, row.result_status) == (WorkStatus.failed, 401)


async def test_a_suspended_users_queued_node_fails_with_invalid_api_key_and_says_so(looms: Looms) -> None:
    key = await another_key(looms.stack, same_user=False)
    loom_id, node = await looms.grow(key=key)
    who = await who_holds(looms.stack, key)
    async with looms.stack.services.ledger.write_sessions() as session:
        await set_standing(session, await session.get(User, who.user_id), Standing.suspended)
        await session.commit()
    looms.runner()
    deadline = time.monotonic() + 10
    while (row := await _node_row(looms, node["id"])).status != "failed":
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    error = json.loads(row.error)
    assert (error["code"], error["message"]) == ("invalid_api_key", (
        "Your access to ACS Infra is suspended. Write to infra@acsresearch.org if you think this is a mistake."))
    assert looms.stack.engine.seen == []
    async with looms.stack.services.ledger.write_sessions() as session:
        await set_standing(session, await session.get(User, who.user_id), Standing.active)
        await session.commit()
    await asyncio.sleep(0.3)
    assert (await looms.node(loom_id, node["id"], key=key))["status"] == "failed"  # it does not run again


async def _node_row(looms: Looms, node_id: str) -> LoomNode:
    async with looms.stack.services.sessions() as session:
        return (await session.exec(select(LoomNode).where(LoomNode.id == uuid.UUID(node_id)))).one()


# -- a stop ------------------------------------------------------------------------------------------------


@pytest.mark.fake(delay_s=0.05)
async def test_a_stop_keeps_the_text_a_running_node_grew_and_pays_those_tokens_once(looms: Looms) -> None:
    loom_id, node = await looms.grow({"model": "llama-8b", "max_tokens": 200})
    looms.runner()
    await looms.wait(loom_id, node["id"], "running", text=True)
    (stopped,) = [n for n in (await looms.stop(loom_id))["nodes"] if n["id"] == node["id"]]
    assert stopped["status"] == "cancelled" and stopped["text"]
    assert fake_text(200).startswith(stopped["text"]) and stopped["logprobs"] is None
    tokens = stopped["text"].count(" t")
    (hold,) = await looms.node_holds(node["id"])
    assert (hold.state, hold.used, hold.counting.value) == (HoldState.settled, 4 + tokens, "partial")
    # The Runner sees the stop at its next watch (0.25 s), then the attempt ends; its late writes are dropped.
    await wait_until(lambda: not looms.runners[0].attempts)
    assert await looms.node(loom_id, node["id"]) == stopped
    (again,) = await looms.node_holds(node["id"])
    assert again.used == hold.used
    (row,) = await looms.node_rows()
    assert row.status == WorkStatus.cancelled
    child = await looms.branch(loom_id, node["id"])  # a stopped Node's text is final: it takes a Branch
    assert child[0]["status"] == "queued"


async def test_a_queued_node_that_is_stopped_never_runs_and_holds_nothing(looms: Looms) -> None:
    loom_id, node = await looms.grow()
    (stopped,) = [n for n in (await looms.stop(loom_id))["nodes"] if n["id"] == node["id"]]
    assert (stopped["status"], stopped["text"]) == ("cancelled", "")
    looms.runner()
    await asyncio.sleep(0.4)
    assert (await looms.node(loom_id, node["id"]))["status"] == "cancelled"
    assert looms.stack.engine.seen == [] and await looms.node_holds(node["id"]) == []


# -- restarts ----------------------------------------------------------------------------------------------


@pytest.mark.fake(delay_s=0.05)
async def test_a_planned_stop_puts_a_node_back_and_it_runs_again_from_the_beginning_charged_once(looms: Looms) -> None:
    loom_id, node = await looms.grow({"model": "llama-8b", "max_tokens": 20})
    first = looms.runner(runner_grace_s=0.1)
    await looms.wait(loom_id, node["id"], "running", text=True)
    await first.stop()
    looms.runners.remove(first)
    queued = await looms.node(loom_id, node["id"])
    assert (queued["status"], queued["text"], queued["logprobs"]) == ("queued", "", None)
    (released,) = await looms.node_holds(node["id"])
    assert (released.state, released.used) == (HoldState.released, 0)
    looms.runner()
    done = await looms.wait(loom_id, node["id"], "completed", timeout_s=30)
    assert done["text"] == fake_text(20)  # from the beginning, not on from the cut
    holds = await looms.node_holds(node["id"])
    assert sorted((h.state.value, h.used) for h in holds) == [("released", 0), ("settled", 24)]


@pytest.mark.fake(delay_s=0.05)
async def test_a_crashed_runners_node_is_found_by_its_lease_and_runs_again(looms: Looms) -> None:
    loom_id, node = await looms.grow({"model": "llama-8b", "max_tokens": 20})
    dead = looms.runner()
    await looms.wait(loom_id, node["id"], "running", text=True)
    await _crash(dead)
    looms.runners.remove(dead)
    assert (await looms.node(loom_id, node["id"]))["status"] == "running"  # until its lease lapses
    looms.runner()
    done = await looms.wait(loom_id, node["id"], "completed", timeout_s=30)
    assert done["text"] == fake_text(20)
    holds = await looms.node_holds(node["id"])
    assert sorted((h.state.value, h.used) for h in holds) == [("released", 0), ("settled", 24)]
    (row,) = await looms.node_rows()
    assert row.attempts == 2


# -- the order of the work ---------------------------------------------------------------------------------


@pytest.mark.fake(delay_s=0.05)
async def test_at_most_eight_nodes_run_at_once_for_all_users_the_oldest_first(looms: Looms) -> None:
    other = await another_key(looms.stack, same_user=False)
    mine_id, my_root = await looms.make()
    theirs_id, their_root = await looms.make(key=other)
    mine = await looms.branch(mine_id, my_root, {"model": "llama-8b", "max_tokens": 6, "n": 8})
    theirs = await looms.branch(theirs_id, their_root, {"model": "llama-8b", "max_tokens": 6, "n": 4}, key=other)
    looms.runner(), looms.runner()
    most = 0
    while any(row.status != WorkStatus.succeeded for row in await looms.node_rows()):
        most = max(most, sum(row.status == WorkStatus.running for row in await looms.node_rows()))
        await asyncio.sleep(0.02)
    assert most == 8
    started = {row.request_id: row.started_at for row in await looms.node_rows()}
    order = sorted(started, key=started.get)
    # The oldest first, whoever made them: my eight, then theirs once mine end.
    assert set(order[:8]) == {f"node-{uuid.UUID(node['id']).hex}" for node in mine}
    assert set(order[8:]) == {f"node-{uuid.UUID(node['id']).hex}" for node in theirs}


@pytest.mark.fake(delay_s=0.05)
async def test_a_long_job_does_not_delay_a_node(looms: Looms) -> None:
    for _ in range(5):  # 4 Jobs run at once; the fifth waits
        assert (await looms.submit({"model": "llama-8b", "prompt": SKY, "max_tokens": 400})).status_code == 202
    looms.runner()
    deadline = time.monotonic() + 10
    while sum(row.status == WorkStatus.running for row in await looms.rows()) < 4:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    loom_id, node = await looms.grow()
    await looms.wait(loom_id, node["id"], "completed")
    jobs = [row for row in await looms.rows() if row.kind == WorkKind.job]
    assert sorted(row.status.value for row in jobs) == ["queued"] + ["running"] * 4


async def test_a_branchs_nodes_are_claimed_in_one_transaction_and_jobs_one_at_a_time(looms: Looms) -> None:
    """The Nodes of a Branch start together (as many as the kind has free places); a Job claim takes
    one row, since each changes which Users have a Job running (the Jobs' fair order)."""
    from ledger.work import queue as queue
    from ledger.store.coltypes import utcnow

    loom_id, root = await looms.make()
    await looms.branch(loom_id, root, {"model": "llama-8b", "n": 8})
    await looms.branch(loom_id, root, {"model": "llama-8b", "n": 2})
    for _ in range(2):
        assert (await looms.submit()).status_code == 202
    models = list(looms.stack.services.catalog.models)
    async with looms.stack.services.ledger.write_sessions() as session:
        nodes = await queue.claim(session, WorkKind.node, models, "test-owner", 30.0, utcnow())
    async with looms.stack.services.ledger.write_sessions() as session:
        more = await queue.claim(session, WorkKind.node, models, "test-owner", 30.0, utcnow())
    async with looms.stack.services.ledger.write_sessions() as session:
        jobs = await queue.claim(session, WorkKind.job, models, "test-owner", 30.0, utcnow())
    assert (len(nodes), len(more), len(jobs)) == (8, 0, 1)
    assert all(row.status == WorkStatus.running and row.lease_owner == "test-owner" for row in nodes + jobs)


async def test_a_runner_that_stalled_past_its_own_lease_drops_the_cut_attempts_late_answer(looms: Looms) -> None:
    """The Runner requeues its own row whose lease lapsed, and may claim it again at once: the
    cut attempt (same owner) must not attach a Hold or write an answer over the new one."""
    from datetime import timedelta

    from ledger.work import queue as queue
    from ledger.store.coltypes import utcnow

    loom_id, root = await looms.make()
    await looms.branch(loom_id, root)
    models, owner = list(looms.stack.services.catalog.models), "stalled-owner"
    sessions = looms.stack.services.ledger.write_sessions
    async with sessions() as session:
        (first,) = await queue.claim(session, WorkKind.node, models, owner, 1.0, utcnow())
    async with sessions() as session:  # its lease lapsed: requeued, and claimed again by the same owner
        assert await queue.requeue(session, first.id, utcnow() + timedelta(seconds=5))
    async with sessions() as session:
        (second,) = await queue.claim(session, WorkKind.node, models, owner, 30.0, utcnow())
    assert (second.id, second.attempts) == (first.id, first.attempts + 1)
    answer = queue.Result(WorkStatus.succeeded, 200, "{}")
    async with sessions() as session:
        assert not await queue.attach_hold(session, first.id, owner, uuid.uuid4(), first.attempts)
    async with sessions() as session:
        assert not await queue.finish(session, first.id, owner, answer, queue.RELEASE, utcnow(),
                                      timedelta(days=1), first.attempts)
    async with sessions() as session:
        assert await queue.finish(session, first.id, owner, answer, queue.RELEASE, utcnow(),
                                  timedelta(days=1), second.attempts)


@pytest.mark.fake(delay_s=0.005)
async def test_a_stop_of_eight_growing_nodes_never_deadlocks_with_their_writes(looms: Looms) -> None:
    """A Stop locks the growing Nodes in the order of their ids, as the Runner's batched writes do:
    in another order the two deadlocked on PostgreSQL and the Stop answered 500."""
    looms.runner()
    for _ in range(4):
        loom_id, root_id = await looms.make()
        made = await looms.branch(loom_id, root_id, {"model": "llama-8b", "max_tokens": 1000, "n": 8})
        for node in made:
            await looms.wait(loom_id, node["id"], "running", text=True)
        stopped = await looms.stop(loom_id)  # 200, or the helper's assert shows the 500
        assert {node["status"] for node in stopped["nodes"] if node["id"] != root_id} == {"cancelled"}
