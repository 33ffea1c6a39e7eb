"""The Loom routes that make, read, list, rename, pin, delete, stop and Branch, on the fake
stack (SQLite) without a Runner: every Node of a Branch stays queued. How Nodes run is
test_loom_nodes.py; the tree's edits test_loom_changes.py; files test_loom_files.py."""
from __future__ import annotations

import json
import re
import uuid
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update
from sqlmodel import select

from ledger.work import looms as ledger_looms
from ledger.store.coltypes import utcnow
from ledger.work.tables import Loom, LoomNode, NodeStatus, Work, WorkKind, WorkStatus
from ledger.tokens.spend import set_spend_stop
from tests.accounts import another_key, set_tokens
from tests.spec import assert_error, validate

UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
BRANCH = {"model": "llama-8b", "max_tokens": 2, "n": 2, "logprobs": 1}


class Looms:
    def __init__(self, stack: Any) -> None:
        self.stack = stack

    def auth(self, key: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key or self.stack.key}"}

    async def call(self, method: str, path: str, body: Any = None, key: str | None = None, **headers: str) -> Any:
        kwargs = {} if body is None else {"json": body}
        return await self.stack.http.request(method, f"/v1/looms{path}", headers={**self.auth(key), **headers},
                                             **kwargs)

    async def make(self, prompt: str = "The sky is", key: str | None = None) -> dict:
        r = await self.call("POST", "", {"prompt": prompt}, key)
        assert r.status_code == 200, r.text
        validate(r.json(), "Loom")
        return r.json()

    async def branch(self, loom: dict, node_id: str | None = None, body: dict | None = None, **kw: Any) -> Any:
        node_id = node_id or loom["nodes"][0]["id"]
        return await self.call("POST", f"/{loom['id']}/nodes/{node_id}/branch", BRANCH if body is None else body, **kw)

    async def read(self, loom: dict, key: str | None = None) -> dict:
        r = await self.call("GET", f"/{loom['id']}", key=key)
        assert r.status_code == 200, r.text
        validate(r.json(), "Loom")
        return r.json()

    async def listed(self) -> list[str]:
        r = await self.call("GET", "")
        assert r.status_code == 200, r.text
        validate(r.json(), "LoomList")
        return [loom["id"] for loom in r.json()["data"]]

    async def set_status(self, node_id: str, status: NodeStatus, text: str = "") -> None:
        """As a Runner would leave the Node and its work row."""
        work_status = {NodeStatus.queued: WorkStatus.queued, NodeStatus.running: WorkStatus.running,
                       NodeStatus.completed: WorkStatus.succeeded}.get(status, WorkStatus(status.value))
        async with self.stack.services.ledger.write_sessions() as session:
            node = await session.get(LoomNode, uuid.UUID(node_id))
            node.status, node.text = status, text
            await session.execute(update(Work).where(Work.id == node.work_id).values(status=work_status))
            await session.commit()


@pytest.fixture
def looms(fake_stack: Any) -> Looms:
    return Looms(fake_stack)


# -- make, read ----------------------------------------------------------------------------------------


async def test_a_new_loom_has_its_completed_root_an_empty_title_and_uuid7_ids(looms: Looms) -> None:
    loom = await looms.make("The sky is")
    assert UUID7.match(loom["id"]) and UUID7.match(loom["nodes"][0]["id"])
    assert loom["object"] == "loom" and loom["title"] == "" and loom["pinned"] is False
    assert loom["nodes"] == [{"id": loom["nodes"][0]["id"], "object": "loom.node", "parent_id": None,
                              "status": "completed", "text": "The sky is", "logprobs": None, "error": None,
                              "request": None}]
    assert abs(loom["created_at"] - utcnow().timestamp()) < 5
    assert await looms.read(loom) == loom


async def test_the_prompt_is_checked_strictly(looms: Looms) -> None:
    assert_error(await looms.call("POST", "", {}), 400, "invalid_request", param="prompt",
                 message="Missing required parameter: 'prompt'.")
    assert_error(await looms.call("POST", "", {"prompt": 3}), 400, "invalid_request", param="prompt",
                 message="Invalid type for 'prompt': expected a string.")
    assert_error(await looms.call("POST", "", {"prompt": "a", "title": "x"}), 400, "invalid_request",
                 param="title", message="Unknown parameter: 'title'.")
    assert_error(await looms.call("POST", "", {"prompt": "a\x00"}), 400, "invalid_request", param="prompt")


async def test_crlf_and_cr_in_the_prompt_are_stored_as_lf(looms: Looms) -> None:
    loom = await looms.make("one\r\ntwo\rthree")
    assert loom["nodes"][0]["text"] == "one\ntwo\nthree"


async def test_another_users_ids_and_ids_that_are_not_uuids_get_404(looms: Looms) -> None:
    loom = await looms.make()
    stranger = await another_key(looms.stack, same_user=False)
    root = loom["nodes"][0]["id"]
    for method, path, body in (("GET", f"/{loom['id']}", None), ("POST", f"/{loom['id']}", {"title": "x"}),
                               ("DELETE", f"/{loom['id']}", None), ("POST", f"/{loom['id']}/cancel", None),
                               ("POST", f"/{loom['id']}/nodes/{root}/branch", BRANCH)):
        assert_error(await looms.call(method, path, body, key=stranger), 404, None, param=None,
                     message=f"None of your Looms has the id {loom['id']}.")
    # An id that is not a UUID is not valid (DESIGN.md: every path id).
    assert_error(await looms.call("GET", "/not-a-uuid"), 400, "invalid_request", param="loom_id",
                 message="Invalid value for 'loom_id': expected a Loom id, a UUID such as "
                         "01a12e70-9370-7a9b-87d6-4c3d2621969e.")
    other_node = str(uuid.uuid4())
    assert_error(await looms.branch(loom, other_node), 404, None,
                 message=f"None of the Nodes of this Loom has the id {other_node}.")
    # Another user's Loom is in nobody else's list.
    r = await looms.call("GET", "", key=stranger)
    assert loom["id"] not in [summary["id"] for summary in r.json()["data"]]


async def test_a_key_of_the_same_user_reads_the_loom(looms: Looms) -> None:
    loom = await looms.make()
    assert (await looms.read(loom, key=await another_key(looms.stack)))["id"] == loom["id"]


# -- Branch --------------------------------------------------------------------------------------------


async def test_a_branch_answers_queued_nodes_with_the_spec_request_and_consecutive_seeds(looms: Looms) -> None:
    loom = await looms.make()
    r = await looms.branch(loom, body={**BRANCH, "seed": 1739262751})
    assert r.status_code == 200, r.text
    validate(r.json(), "Branch")
    nodes = r.json()["data"]
    served = looms.stack.services.resolve_model("llama-8b").served_model_name
    root = loom["nodes"][0]["id"]
    for i, node in enumerate(nodes):
        assert UUID7.match(node["id"])
        assert (node["parent_id"], node["status"], node["text"], node["logprobs"], node["error"]) == (
            root, "queued", "", None, None)
        assert list(node["request"]) == ["model", "max_tokens", "temperature", "logprobs", "top_p", "top_k",
                                         "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty",
                                         "seed", "stop"]
        assert node["request"] == {"model": served, "max_tokens": 2, "temperature": 1, "logprobs": 1, "top_p": 1,
                                   "top_k": 0, "min_p": 0, "presence_penalty": 0, "frequency_penalty": 0,
                                   "repetition_penalty": 1, "seed": 1739262751 + i, "stop": None}
    read = await looms.read(loom)
    assert [node["id"] for node in read["nodes"]] == [root] + [node["id"] for node in nodes]
    assert read["title"] == "The sky is"


async def test_a_branch_without_fields_takes_the_defaults_and_a_drawn_seed(looms: Looms) -> None:
    loom = await looms.make()
    seeds = []
    for _ in range(5):
        r = await looms.branch(loom, body={"model": "llama-8b"})
        assert r.status_code == 200, r.text
        (node,) = r.json()["data"]
        assert node["request"]["max_tokens"] == 16 and node["request"]["logprobs"] is None
        seeds.append(node["request"]["seed"])
    assert all(0 <= seed <= 2_147_483_647 for seed in seeds) and len(set(seeds)) > 1


async def test_a_nodes_request_sent_back_as_a_branch_is_accepted(looms: Looms) -> None:
    loom = await looms.make()
    (node,) = (await looms.branch(loom, body={"model": "llama-8b", "stop": ["\n"], "temperature": 0.5})).json()["data"]
    again = (await looms.branch(loom, body=node["request"])).json()["data"][0]
    assert again["request"] == node["request"]


@pytest.mark.parametrize("body, param, message", [
    ({"max_tokens": 2}, "model", "Missing required parameter: 'model'."),
    ({**BRANCH, "prompt": "x"}, "prompt", "Unknown parameter: 'prompt'."),
    ({**BRANCH, "echo": True}, "echo", "Unknown parameter: 'echo'."),
    ({**BRANCH, "n": 9}, "n", "Invalid value for 'n': expected a value less than or equal to 8."),
    ({**BRANCH, "n": 0}, "n", "Invalid value for 'n': expected a value greater than or equal to 1."),
    ({**BRANCH, "n": "2"}, "n", "Invalid type for 'n': expected a number."),
    ({**BRANCH, "max_tokens": 1001}, "max_tokens",
     "Invalid value for 'max_tokens': expected a value less than or equal to 1000."),
    ({**BRANCH, "max_tokens": 0}, "max_tokens",
     "Invalid value for 'max_tokens': expected a value greater than or equal to 1."),
    ({**BRANCH, "top_p": 0}, "top_p", "Invalid value for 'top_p': expected a value greater than 0."),
    ({**BRANCH, "temperature": 5}, "temperature",
     "Invalid value for 'temperature': expected a value less than or equal to 2."),
    ({**BRANCH, "logprobs": True}, "logprobs", "Invalid type for 'logprobs': expected a number or null."),
    ({**BRANCH, "n": 8, "seed": 9_007_199_254_740_985}, "seed",
     "Invalid value for 'seed': expected a seed whose last Node's seed, seed + n - 1, is at most 9007199254740991."),
])
async def test_a_branch_that_completions_would_refuse_gets_400_and_makes_no_node(looms: Looms, body: dict,
                                                                                 param: str, message: str) -> None:
    loom = await looms.make()
    assert_error(await looms.branch(loom, body=body), 400, "invalid_request", param=param, message=message)
    assert len((await looms.read(loom))["nodes"]) == 1


async def test_the_last_seed_may_be_the_largest_integer_json_holds(looms: Looms) -> None:
    loom = await looms.make()
    r = await looms.branch(loom, body={**BRANCH, "n": 8, "seed": 9_007_199_254_740_984})
    assert r.status_code == 200 and r.json()["data"][-1]["request"]["seed"] == 9_007_199_254_740_991


async def test_a_model_the_api_does_not_serve_gets_model_not_found(looms: Looms) -> None:
    loom = await looms.make()
    assert_error(await looms.branch(loom, body={**BRANCH, "model": "gpt-4"}), 400, "model_not_found", param="model")


@pytest.mark.parametrize("status", [NodeStatus.queued, NodeStatus.running, NodeStatus.failed])
async def test_a_branch_under_a_node_that_is_not_completed_or_cancelled_gets_409(looms: Looms,
                                                                                 status: NodeStatus) -> None:
    loom = await looms.make()
    (node,) = (await looms.branch(loom, body={"model": "llama-8b"})).json()["data"]
    await looms.set_status(node["id"], status)
    error = assert_error(await looms.branch(loom, node["id"]), 409, None, headers={"x-should-retry": "false"})
    assert error["message"] == ("This Node failed, so it takes no Branch. Grow a Branch under its parent, or delete it."
                                if status == NodeStatus.failed else
                                f"This Node is {status.value}, so it takes no Branch yet. Branch only under a "
                                f"completed or cancelled Node: wait until it ends, or stop it with "
                                f"POST /v1/looms/{loom['id']}/cancel.")
    await looms.set_status(node["id"], NodeStatus.cancelled, "grew")
    assert (await looms.branch(loom, node["id"])).status_code == 200


async def test_a_branch_that_one_node_cannot_be_held_for_gets_budget_exceeded(looms: Looms) -> None:
    loom = await looms.make("The sky is")
    await set_tokens(looms.stack, allowance=0)
    assert_error(await looms.branch(loom), 429, "budget_exceeded", headers={"x-should-retry": "false"})
    assert len((await looms.read(loom))["nodes"]) == 1
    # The smallest request of one Node: its path's tokens and one token (the fake counts a BOS and each character).
    await set_tokens(looms.stack, allowance=len("The sky is") + 2)
    r = await looms.branch(loom, body={**BRANCH, "max_tokens": 1000, "n": 8})
    assert r.status_code == 200, r.text


async def test_a_branch_while_new_gpu_work_is_paused_gets_spend_cap(looms: Looms) -> None:
    loom = await looms.make()
    async with looms.stack.services.ledger.write_sessions() as session:
        await set_spend_stop(session, True, "test")
    looms.stack.services.ledger._spend_read_at = float("-inf")
    try:
        assert_error(await looms.branch(loom), 429, "spend_cap",
                     headers={"Retry-After": "3600", "x-should-retry": "false"})
    finally:
        async with looms.stack.services.ledger.write_sessions() as session:
            await set_spend_stop(session, False)
        looms.stack.services.ledger._spend_read_at = float("-inf")


async def test_a_loom_holds_2000_nodes_and_the_409_says_how_many_more_fit(looms: Looms) -> None:
    loom = await looms.make()
    root = uuid.UUID(loom["nodes"][0]["id"])
    async with looms.stack.services.ledger.write_sessions() as session:
        for i in range(1994):
            session.add(LoomNode(loom_id=uuid.UUID(loom["id"]), parent_id=root, position=i, text=str(i)))
        await session.commit()
    error = assert_error(await looms.branch(loom, body={**BRANCH, "n": 8}), 409, None)
    assert error["message"] == ("This Loom has 1995 Nodes and holds at most 2000, so 5 more fit. "
                                "Delete Nodes to make room.")
    assert (await looms.branch(loom, body={**BRANCH, "n": 5})).status_code == 200
    error = assert_error(await looms.branch(loom, body={**BRANCH, "n": 1}), 409, None)
    assert error["message"] == ("This Loom has 2000 Nodes, the most that a Loom holds, so no more fit. "
                                "Delete Nodes to make room.")


async def test_the_first_branch_names_the_loom_after_the_first_line_of_its_root_cut_to_40(looms: Looms) -> None:
    loom = await looms.make("  A very long first line that goes on and on past forty characters\nsecond")
    await looms.branch(loom)
    assert (await looms.read(loom))["title"] == "A very long first line that goes on and "[:40]


async def test_a_branch_queues_one_node_work_row_per_node(looms: Looms) -> None:
    loom = await looms.make()
    nodes = (await looms.branch(loom, body={**BRANCH, "n": 3})).json()["data"]
    async with looms.stack.services.sessions() as session:
        rows = (await session.exec(select(LoomNode.work_id).where(
            LoomNode.id.in_([uuid.UUID(node["id"]) for node in nodes])))).all()
        works = (await session.exec(select(Work).where(Work.id.in_(rows)))).all()
    assert len(works) == 3 and all(w.kind == WorkKind.node and w.status == WorkStatus.queued for w in works)
    assert {json.loads(w.request)["node_id"] for w in works} == {node["id"] for node in nodes}


# -- list, rename, pin --------------------------------------------------------------------------------


async def test_the_list_is_pinned_first_newest_pin_first_then_by_last_change(looms: Looms) -> None:
    a, b, c = [await looms.make(prompt) for prompt in ("a", "b", "c")]
    assert (await looms.listed())[:3] == [c["id"], b["id"], a["id"]]
    await looms.branch(a)  # a Branch moves it
    assert (await looms.listed())[:3] == [a["id"], c["id"], b["id"]]
    await looms.call("POST", f"/{b['id']}", {"pinned": True})
    await looms.call("POST", f"/{c['id']}", {"pinned": True})
    assert (await looms.listed())[:3] == [c["id"], b["id"], a["id"]]
    await looms.call("POST", f"/{c['id']}", {"pinned": False})  # back to its place: a pin moved nothing
    assert (await looms.listed())[:3] == [b["id"], a["id"], c["id"]]
    r = await looms.call("GET", "")
    summary = next(s for s in r.json()["data"] if s["id"] == a["id"])
    assert summary["prompt"] == "a" and summary["title"] == "a" and summary["pinned"] is False


async def test_the_list_has_the_newest_100_and_an_older_loom_is_still_read(looms: Looms) -> None:
    first = await looms.make("first")
    for i in range(100):
        await looms.make(f"p{i}")
    listed = await looms.listed()
    assert len(listed) == 100 and first["id"] not in listed
    assert (await looms.read(first))["id"] == first["id"]


async def test_a_rename_trims_cuts_to_120_and_moves_the_loom_a_pin_does_not(looms: Looms) -> None:
    a, b = await looms.make("a"), await looms.make("b")
    r = await looms.call("POST", f"/{a['id']}", {"title": "  " + "x" * 130 + " "})
    assert r.status_code == 200 and r.json()["title"] == "x" * 120
    validate(r.json(), "Loom")
    assert (await looms.listed())[:2] == [a["id"], b["id"]]
    before = {s["id"]: s["updated_at"] for s in (await looms.call("GET", "")).json()["data"]}
    r = await looms.call("POST", f"/{b['id']}", {"pinned": True})
    assert r.json()["pinned"] is True and r.json()["title"] == ""
    after = {s["id"]: s["updated_at"] for s in (await looms.call("GET", "")).json()["data"]}
    assert after[b["id"]] == before[b["id"]]


async def test_an_empty_title_leaves_the_loom_untitled_so_its_next_branch_names_it(looms: Looms) -> None:
    loom = await looms.make("Root line")
    await looms.call("POST", f"/{loom['id']}", {"title": "Skies"})
    await looms.branch(loom)
    assert (await looms.read(loom))["title"] == "Skies"
    r = await looms.call("POST", f"/{loom['id']}", {"title": "   "})
    assert r.json()["title"] == ""
    await looms.branch(loom)
    assert (await looms.read(loom))["title"] == "Root line"


async def test_a_change_is_checked_strictly(looms: Looms) -> None:
    loom = await looms.make()
    assert_error(await looms.call("POST", f"/{loom['id']}", {"pinned": 1}), 400, "invalid_request", param="pinned",
                 message="Invalid type for 'pinned': expected a boolean.")
    assert_error(await looms.call("POST", f"/{loom['id']}", {"name": "x"}), 400, "invalid_request", param="name")


# -- delete, stop ----------------------------------------------------------------------------------------


async def test_a_deleted_loom_is_gone_at_once_and_erased_14_days_later(looms: Looms) -> None:
    loom = await looms.make()
    await looms.branch(loom)
    await looms.call("POST", f"/{loom['id']}/cancel")
    r = await looms.call("DELETE", f"/{loom['id']}")
    assert r.status_code == 200 and r.json() == {"id": loom["id"], "object": "loom", "deleted": True}
    validate(r.json(), "DeletedLoom")
    assert_error(await looms.call("GET", f"/{loom['id']}"), 404, None)
    assert loom["id"] not in await looms.listed()
    assert_error(await looms.branch(loom), 404, None)
    loom_id = uuid.UUID(loom["id"])
    async with looms.stack.services.ledger.write_sessions() as session:
        await ledger_looms.erase_deleted(session, utcnow() + timedelta(days=13))
    async with looms.stack.services.sessions() as session:
        assert (await session.get(Loom, loom_id)) is not None
    async with looms.stack.services.ledger.write_sessions() as session:
        await ledger_looms.erase_deleted(session, utcnow() + timedelta(days=14, minutes=1))
    async with looms.stack.services.sessions() as session:
        assert (await session.get(Loom, loom_id)) is None
        assert (await session.exec(select(LoomNode).where(LoomNode.loom_id == loom_id))).first() is None


async def test_a_loom_with_a_growing_node_is_not_deleted(looms: Looms) -> None:
    loom = await looms.make()
    await looms.branch(loom)
    assert_error(await looms.call("DELETE", f"/{loom['id']}"), 409, None, headers={"x-should-retry": "false"})
    assert (await looms.read(loom))["id"] == loom["id"]


async def test_a_stop_cancels_queued_nodes_which_never_run_and_hold_nothing(looms: Looms) -> None:
    loom = await looms.make()
    nodes = (await looms.branch(loom)).json()["data"]
    r = await looms.call("POST", f"/{loom['id']}/cancel")
    assert r.status_code == 200
    validate(r.json(), "Loom")
    assert [node["status"] for node in r.json()["nodes"]] == ["completed", "cancelled", "cancelled"]
    async with looms.stack.services.sessions() as session:
        works = (await session.exec(select(Work).join(LoomNode, LoomNode.work_id == Work.id).where(
            LoomNode.id.in_([uuid.UUID(node["id"]) for node in nodes])))).all()
    assert [w.status for w in works] == [WorkStatus.cancelled] * 2 and all(w.hold_id is None for w in works)
    # A stop when no Node grows changes nothing.
    again = await looms.call("POST", f"/{loom['id']}/cancel")
    assert again.json() == r.json()


async def test_a_retry_with_the_same_idempotency_key_answers_the_loom_as_it_is_now(looms: Looms) -> None:
    first = await looms.call("POST", "", {"prompt": "once"}, **{"Idempotency-Key": "make-1"})
    loom = first.json()
    await looms.call("POST", f"/{loom['id']}", {"title": "renamed"})
    again = await looms.call("POST", "", {"prompt": "once"}, **{"Idempotency-Key": "make-1"})
    assert again.json()["id"] == loom["id"] and again.json()["title"] == "renamed"
    await looms.call("DELETE", f"/{loom['id']}")
    assert_error(await looms.call("POST", "", {"prompt": "once"}, **{"Idempotency-Key": "make-1"}), 404, None)


async def test_a_branch_retried_with_its_idempotency_key_makes_no_second_node(looms: Looms) -> None:
    loom = await looms.make()
    first = await looms.branch(loom, **{"Idempotency-Key": "b-1"})
    again = await looms.branch(loom, **{"Idempotency-Key": "b-1"})
    assert again.status_code == 200 and again.json() == first.json()
    assert len((await looms.read(loom))["nodes"]) == 3
    assert_error(await looms.branch(loom, body={**BRANCH, "n": 1}, **{"Idempotency-Key": "b-1"}), 409,
                 "idempotency_conflict")
