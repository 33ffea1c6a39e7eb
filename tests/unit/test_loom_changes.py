"""The tree's edits through the routes, on the fake stack (SQLite): edit, split, sibling,
new root and delete a Node, each case and each 409 of the guide ("Change the tree",
"Delete a Node or a Loom"). Nodes with log probabilities and states that a Runner
would leave are written into the ledger directly (`Trees.add`)."""
from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from sqlmodel import select

from ledger.work import loom_changes as changes
from ledger.work.tables import LoomNode, NodeStatus
from tests.accounts import another_key
from tests.spec import assert_error, validate

# The guide's two Nodes of "Follow a Branch".
CRYING = {
    "text_offset": [0, 7],
    "token_logprobs": [-4.989488124847412, -1.722730040550232],
    "tokens": [" crying", ","],
    "top_logprobs": [{" the": -1.4269880056381226, " crying": -4.989488124847412}, {",": -1.722730040550232}],
}
COLOUR = {
    "text_offset": [0, 4],
    "token_logprobs": [-1.4269880056381226, -5.764825344085693],
    "tokens": [" the", " colour"],
    "top_logprobs": [{" the": -1.4269880056381226}, {" limit": -0.07732537388801575, " colour": -5.764825344085693}],
}
REQUEST = {"model": "meta-llama/Llama-3.1-8B", "max_tokens": 2, "temperature": 1, "logprobs": 1, "top_p": 1,
           "top_k": 0, "min_p": 0, "presence_penalty": 0, "frequency_penalty": 0, "repetition_penalty": 1,
           "seed": 1739262751, "stop": None}
GROWING = [NodeStatus.queued, NodeStatus.running]


class Trees:
    """The Loom routes of the stack's key, and Nodes written as a Runner would leave them."""

    def __init__(self, stack: Any) -> None:
        self.stack = stack

    async def call(self, method: str, path: str, body: Any = None, key: str | None = None) -> Any:
        kwargs = {} if body is None else {"json": body}
        headers = {"Authorization": f"Bearer {key or self.stack.key}"}
        return await self.stack.http.request(method, f"/v1/looms{path}", headers=headers, **kwargs)

    async def ok(self, method: str, path: str, body: Any = None) -> dict:
        r = await self.call(method, path, body)
        assert r.status_code == 200, r.text
        validate(r.json(), "Loom")
        return r.json()

    async def make(self, prompt: str = "The sky is") -> dict:
        return await self.ok("POST", "", {"prompt": prompt})

    async def read(self, loom: dict) -> dict:
        return await self.ok("GET", f"/{loom['id']}")

    async def add(self, loom: dict, parent: str | None, text: str = "", status: NodeStatus = NodeStatus.completed,
                  logprobs: dict | None = None, request: dict | None = None, error: dict | None = None) -> str:
        """A Node under `parent`, after its last sibling."""
        async with self.stack.services.ledger.write_sessions() as session:
            loom_id, parent_id = uuid.UUID(loom["id"]), None if parent is None else uuid.UUID(parent)
            siblings = (await session.exec(select(LoomNode.position).where(
                LoomNode.loom_id == loom_id, LoomNode.parent_id == parent_id))).all()
            node = LoomNode(loom_id=loom_id, parent_id=parent_id, position=max(siblings, default=-1) + 1,
                            status=status, text=text, logprobs=None if logprobs is None else json.dumps(logprobs),
                            request=None if request is None else json.dumps(request),
                            error=None if error is None else json.dumps(error))
            session.add(node)
            await session.commit()
            return str(node.id)

    async def row(self, node_id: str) -> LoomNode:
        async with self.stack.services.sessions() as session:
            return await session.get(LoomNode, uuid.UUID(node_id))

    async def listed(self) -> list[str]:
        r = await self.call("GET", "")
        assert r.status_code == 200, r.text
        return [loom["id"] for loom in r.json()["data"]]

    async def guide_loom(self) -> tuple[dict, str, str]:
        """The Loom of "Follow a Branch": "The sky is", then " crying," and " the colour"."""
        loom = await self.make()
        root = loom["nodes"][0]["id"]
        crying = await self.add(loom, root, " crying,", logprobs=CRYING, request=REQUEST)
        colour = await self.add(loom, root, " the colour", logprobs=COLOUR, request={**REQUEST, "seed": 1739262752})
        return loom, crying, colour


@pytest.fixture
def trees(fake_stack: Any) -> Trees:
    return Trees(fake_stack)


def by_id(loom: dict) -> dict[str, dict]:
    return {node["id"]: node for node in loom["nodes"]}


def path_text(loom: dict, node_id: str) -> str:
    nodes, text = by_id(loom), ""
    while node_id is not None:
        text, node_id = nodes[node_id]["text"] + text, nodes[node_id]["parent_id"]
    return text


def conflict(r: Any, message: str) -> None:
    assert_error(r, 409, None, param=None, message=message, type="invalid_request_error",
                 headers={"x-should-retry": "false"})


def stop_or_wait(loom: dict) -> str:
    """How the API's 409s tell you to stop a growing Branch: its route (the App names its button)."""
    return f"Stop the Branch with POST /v1/looms/{loom['id']}/cancel, or wait until it ends."


# -- edit ----------------------------------------------------------------------------------------------


async def test_an_edit_rewrites_the_text_drops_its_logprobs_and_the_nodes_under_it_keep_theirs(trees: Trees) -> None:
    loom, crying, _ = await trees.guide_loom()
    under = await trees.add(loom, crying, " and", logprobs={**CRYING, "tokens": [" a", "nd"], "text_offset": [0, 2]})
    deeper = await trees.add(loom, under, " then")
    after = await trees.ok("POST", f"/{loom['id']}/nodes/{crying}", {"text": " weeping,"})
    node = by_id(after)[crying]
    assert (node["text"], node["logprobs"], node["request"], node["status"]) == (" weeping,", None, REQUEST,
                                                                               "completed")
    assert by_id(after)[under]["text"] == " and" and by_id(after)[under]["logprobs"] is not None
    assert path_text(after, deeper) == "The sky is weeping, and then"
    assert (await trees.row(crying)).text_modified and not (await trees.row(crying)).context_modified
    assert [(await trees.row(n)).context_modified for n in (under, deeper)] == [True, True]
    assert after == await trees.read(loom)


async def test_the_same_text_changes_nothing_and_a_new_one_moves_the_loom_up(trees: Trees) -> None:
    loom, crying, _ = await trees.guide_loom()
    newer = await trees.make("Newer")
    assert await trees.listed() == [newer["id"], loom["id"]]
    before = await trees.read(loom)
    assert await trees.ok("POST", f"/{loom['id']}/nodes/{crying}", {"text": " crying,"}) == before
    assert not (await trees.row(crying)).text_modified
    assert await trees.listed() == [newer["id"], loom["id"]]
    await trees.ok("POST", f"/{loom['id']}/nodes/{crying}", {"text": " crying!"})
    assert await trees.listed() == [loom["id"], newer["id"]]


async def test_the_root_can_be_edited(trees: Trees) -> None:
    loom, crying, _ = await trees.guide_loom()
    root = loom["nodes"][0]["id"]
    after = await trees.ok("POST", f"/{loom['id']}/nodes/{root}", {"text": "The sea is"})
    assert path_text(after, crying) == "The sea is crying,"


async def test_crlf_and_a_lone_cr_are_stored_as_lf_in_each_change(trees: Trees) -> None:
    loom, crying, colour = await trees.guide_loom()
    root = loom["nodes"][0]["id"]
    after = await trees.ok("POST", f"/{loom['id']}/nodes/{crying}", {"text": "a\r\nb\rc"})
    assert by_id(after)[crying]["text"] == "a\nb\nc"
    after = await trees.ok("POST", f"/{loom['id']}/nodes/{colour}/split", {"offset": 3, "text": "x\r\ny\rz"})
    assert [by_id(after)[colour]["text"], after["nodes"][-1]["text"]] == ["x\ny", "\nz"]
    after = await trees.ok("POST", f"/{loom['id']}/nodes/{crying}/sibling", {"text": "s\r\n"})
    assert after["nodes"][-1]["text"] == "s\n"
    assert root != (after := await trees.ok("POST", f"/{loom['id']}/root", {"text": "r\rr"}))["nodes"][0]["id"]
    assert after["nodes"][0]["text"] == "r\nr"


async def test_an_edit_or_a_split_of_a_failed_node_gets_409(trees: Trees) -> None:
    loom = await trees.make()
    error = {"message": "Inference failed.", "type": "upstream_error", "param": None, "code": None}
    failed = await trees.add(loom, loom["nodes"][0]["id"], " bl", NodeStatus.failed, request=REQUEST, error=error)
    before = await trees.read(loom)
    for path, body in (("", {"text": "x"}), ("/split", {"offset": 1})):
        conflict(await trees.call("POST", f"/{loom['id']}/nodes/{failed}{path}", body), changes.FAILED)
    assert await trees.read(loom) == before
    # A failed Node can be deleted.
    assert len((await trees.ok("DELETE", f"/{loom['id']}/nodes/{failed}"))["nodes"]) == 1


@pytest.mark.parametrize("status", GROWING)
async def test_an_edit_or_a_split_while_a_node_under_it_grows_gets_409(trees: Trees, status: NodeStatus) -> None:
    loom, crying, colour = await trees.guide_loom()
    growing = await trees.add(loom, await trees.add(loom, crying, " and"), "", status, request=REQUEST)
    message = f"A Node under this Node is queued or running. {stop_or_wait(loom)}"
    for path, body in (("", {"text": "x"}), ("/split", {"offset": 1})):
        conflict(await trees.call("POST", f"/{loom['id']}/nodes/{crying}{path}", body), message)
        # The growing Node itself: 409 too.
        conflict(await trees.call("POST", f"/{loom['id']}/nodes/{growing}{path}", body),
                 f"This Node is {status.value}. {stop_or_wait(loom)}")
    # A Node that grows elsewhere in the Loom touches no other Node's edit.
    after = await trees.ok("POST", f"/{loom['id']}/nodes/{colour}", {"text": " the color"})
    assert by_id(after)[colour]["text"] == " the color" and by_id(after)[crying]["text"] == " crying,"


# -- split ---------------------------------------------------------------------------------------------


async def test_the_guides_split_gives_each_half_the_log_probability_of_its_token(trees: Trees) -> None:
    loom, crying, _ = await trees.guide_loom()
    after = await trees.ok("POST", f"/{loom['id']}/nodes/{crying}/split", {"offset": 7})
    node = by_id(after)[crying]
    (child,) = [n for n in after["nodes"] if n["parent_id"] == crying]
    assert (node["text"], node["request"]) == (" crying", REQUEST)
    assert node["logprobs"] == {"text_offset": [0], "token_logprobs": [-4.989488124847412], "tokens": [" crying"],
                                "top_logprobs": [{" the": -1.4269880056381226, " crying": -4.989488124847412}]}
    assert (child["text"], child["status"], child["error"]) == (",", "completed", None)
    assert child["logprobs"] == {"text_offset": [0], "token_logprobs": [-1.722730040550232], "tokens": [","],
                                 "top_logprobs": [{",": -1.722730040550232}]}
    assert child["request"] == {**REQUEST, "seed": None} and list(child["request"]) == list(REQUEST)
    # The child comes right after the Node, before the Node's next sibling.
    ids = [n["id"] for n in after["nodes"]]
    assert ids.index(child["id"]) == ids.index(crying) + 1
    node_row, child_row = await trees.row(crying), await trees.row(child["id"])
    assert (node_row.slice_offset, node_row.slice_end, child_row.slice_offset, child_row.slice_end) == (0, 7, 7, 8)
    assert not (node_row.text_modified or child_row.text_modified or child_row.context_modified)


async def test_a_split_moves_the_children_under_the_new_child_in_their_order(trees: Trees) -> None:
    loom, crying, _ = await trees.guide_loom()
    first, second = [await trees.add(loom, crying, text) for text in (" and", " but")]
    deeper = await trees.add(loom, first, " then")
    before = await trees.read(loom)
    after = await trees.ok("POST", f"/{loom['id']}/nodes/{crying}/split", {"offset": 3})
    (child,) = [n for n in after["nodes"] if n["parent_id"] == crying]
    assert [n["id"] for n in after["nodes"] if n["parent_id"] == child["id"]] == [first, second]
    for node_id in (first, second, deeper):
        assert path_text(after, node_id) == path_text(before, node_id)
        assert not (await trees.row(node_id)).context_modified
    assert path_text(after, child["id"]) == "The sky is crying,"


async def test_a_token_across_the_cut_leaves_the_new_child_none(trees: Trees) -> None:
    loom, _, colour = await trees.guide_loom()
    after = await trees.ok("POST", f"/{loom['id']}/nodes/{colour}/split", {"offset": 6})
    (child,) = [n for n in after["nodes"] if n["parent_id"] == colour]
    assert (by_id(after)[colour]["text"], child["text"]) == (" the c", "olour")
    assert by_id(after)[colour]["logprobs"] == {"text_offset": [0], "token_logprobs": [-1.4269880056381226],
                                                "tokens": [" the"], "top_logprobs": [{" the": -1.4269880056381226}]}
    assert child["logprobs"] is None


async def test_a_split_at_the_start_or_past_the_end(trees: Trees) -> None:
    loom, crying, colour = await trees.guide_loom()
    after = await trees.ok("POST", f"/{loom['id']}/nodes/{crying}/split", {"offset": 10**30})
    (child,) = [n for n in after["nodes"] if n["parent_id"] == crying]
    assert (by_id(after)[crying]["text"], child["text"], child["logprobs"]) == (" crying,", "", None)
    assert by_id(after)[crying]["logprobs"] == CRYING
    after = await trees.ok("POST", f"/{loom['id']}/nodes/{colour}/split", {"offset": 0})
    (child,) = [n for n in after["nodes"] if n["parent_id"] == colour]
    assert (by_id(after)[colour]["text"], by_id(after)[colour]["logprobs"]) == ("", None)
    assert (child["text"], child["logprobs"]) == (" the colour", COLOUR)


async def test_a_split_counts_unicode_code_points(trees: Trees) -> None:
    loom = await trees.make()
    node = await trees.add(loom, loom["nodes"][0]["id"], "🙂é🙂", request=REQUEST)
    after = await trees.ok("POST", f"/{loom['id']}/nodes/{node}/split", {"offset": 2})
    (child,) = [n for n in after["nodes"] if n["parent_id"] == node]
    assert (by_id(after)[node]["text"], child["text"]) == ("🙂é", "🙂")


async def test_a_split_of_a_split_keeps_the_ranges_within_the_first_sample(trees: Trees) -> None:
    loom, crying, _ = await trees.guide_loom()
    after = await trees.ok("POST", f"/{loom['id']}/nodes/{crying}/split", {"offset": 3})
    (child,) = [n for n in after["nodes"] if n["parent_id"] == crying]
    after = await trees.ok("POST", f"/{loom['id']}/nodes/{child['id']}/split", {"offset": 2})
    (grandchild,) = [n for n in after["nodes"] if n["parent_id"] == child["id"]]
    assert [by_id(after)[n]["text"] for n in (crying, child["id"], grandchild["id"])] == [" cr", "yi", "ng,"]
    rows = [await trees.row(n) for n in (crying, child["id"], grandchild["id"])]
    ranges = [(row.slice_offset, row.slice_end) for row in rows]
    assert ranges == [(0, 3), (3, 5), (5, 8)]


async def test_a_split_with_text_cuts_the_edited_text_and_neither_half_keeps_logprobs(trees: Trees) -> None:
    loom, crying, _ = await trees.guide_loom()
    under = await trees.add(loom, crying, " and")
    after = await trees.ok("POST", f"/{loom['id']}/nodes/{crying}/split", {"offset": 7, "text": " sobbing, loudly"})
    (child,) = [n for n in after["nodes"] if n["parent_id"] == crying]
    assert (by_id(after)[crying]["text"], child["text"]) == (" sobbin", "g, loudly")
    assert by_id(after)[crying]["logprobs"] is None and child["logprobs"] is None
    assert by_id(after)[under]["parent_id"] == child["id"]
    assert path_text(after, under) == "The sky is sobbing, loudly and"
    assert (await trees.row(crying)).text_modified and (await trees.row(child["id"])).text_modified
    assert (await trees.row(under)).context_modified
    # The same text, sent back: a cut of it, without log probabilities all the same.
    loom, crying, _ = await trees.guide_loom()
    after = await trees.ok("POST", f"/{loom['id']}/nodes/{crying}/split", {"offset": 7, "text": " crying,"})
    assert by_id(after)[crying]["logprobs"] is None and not (await trees.row(crying)).text_modified


async def test_a_split_of_a_cancelled_node_or_of_one_without_request(trees: Trees) -> None:
    loom = await trees.make()
    root = loom["nodes"][0]["id"]
    stopped = await trees.add(loom, root, " grey and", NodeStatus.cancelled, request=REQUEST)
    after = await trees.ok("POST", f"/{loom['id']}/nodes/{stopped}/split", {"offset": 5})
    (child,) = [n for n in after["nodes"] if n["parent_id"] == stopped]
    assert (child["status"], child["text"], child["request"]) == ("cancelled", " and", {**REQUEST, "seed": None})
    stopped_child = child["id"]
    after = await trees.ok("POST", f"/{loom['id']}/nodes/{root}/split", {"offset": 4})
    (child,) = [n for n in after["nodes"] if n["parent_id"] == root]
    assert (after["nodes"][0]["text"], child["text"], child["request"]) == ("The ", "sky is", None)
    assert path_text(after, stopped_child) == "The sky is grey and"


@pytest.mark.parametrize("status", GROWING)
async def test_a_split_of_a_node_that_grows_gets_409(trees: Trees, status: NodeStatus) -> None:
    loom = await trees.make()
    growing = await trees.add(loom, loom["nodes"][0]["id"], " bl", status, request=REQUEST)
    conflict(await trees.call("POST", f"/{loom['id']}/nodes/{growing}/split", {"offset": 1}),
             f"This Node is {status.value}. {stop_or_wait(loom)}")


# -- sibling -------------------------------------------------------------------------------------------


async def test_a_sibling_comes_after_the_last_sibling_completed_and_without_request(trees: Trees) -> None:
    loom, crying, colour = await trees.guide_loom()
    await trees.add(loom, crying, " and")
    after = await trees.ok("POST", f"/{loom['id']}/nodes/{crying}/sibling", {"text": " blue"})
    root = loom["nodes"][0]["id"]
    siblings = [n for n in after["nodes"] if n["parent_id"] == root]
    assert [n["id"] for n in siblings[:2]] == [crying, colour]
    assert {k: siblings[2][k] for k in ("status", "text", "logprobs", "error", "request")} == {
        "status": "completed", "text": " blue", "logprobs": None, "error": None, "request": None}
    assert after["nodes"][-1] == siblings[2]


async def test_a_sibling_of_the_root_gets_409(trees: Trees) -> None:
    loom = await trees.make()
    conflict(await trees.call("POST", f"/{loom['id']}/nodes/{loom['nodes'][0]['id']}/sibling", {"text": "x"}),
             "A root has no sibling. Write a sibling of a Node under the root, or replace the tree with "
             f"POST /v1/looms/{loom['id']}/root.")


@pytest.mark.parametrize("status", GROWING)
async def test_a_sibling_while_a_node_under_the_parent_grows_gets_409(trees: Trees, status: NodeStatus) -> None:
    loom, crying, colour = await trees.guide_loom()
    await trees.add(loom, colour, "", status, request=REQUEST)
    conflict(await trees.call("POST", f"/{loom['id']}/nodes/{crying}/sibling", {"text": "x"}),
             f"A Node under this Node's parent is queued or running. {stop_or_wait(loom)}")
    # Under another parent, the sibling is written.
    under = await trees.add(loom, crying, " and")
    assert (await trees.ok("POST", f"/{loom['id']}/nodes/{under}/sibling", {"text": " but"}))["nodes"]


# -- new root ------------------------------------------------------------------------------------------


async def test_a_new_root_replaces_the_whole_tree_and_moves_the_loom(trees: Trees) -> None:
    loom, crying, _ = await trees.guide_loom()
    newer = await trees.make("Newer")
    after = await trees.ok("POST", f"/{loom['id']}/root", {"text": "Once upon a time"})
    (root,) = after["nodes"]
    assert {k: root[k] for k in ("parent_id", "status", "text", "logprobs", "error", "request")} == {
        "parent_id": None, "status": "completed", "text": "Once upon a time", "logprobs": None, "error": None,
        "request": None}
    assert root["id"] != loom["nodes"][0]["id"]
    assert await trees.listed() == [loom["id"], newer["id"]]
    assert_error(await trees.call("POST", f"/{loom['id']}/nodes/{crying}", {"text": "x"}), 404, None)


@pytest.mark.parametrize("status", GROWING)
async def test_a_new_root_while_any_node_of_the_loom_grows_gets_409(trees: Trees, status: NodeStatus) -> None:
    loom, crying, _ = await trees.guide_loom()
    await trees.add(loom, crying, "", status, request=REQUEST)
    before = await trees.read(loom)
    conflict(await trees.call("POST", f"/{loom['id']}/root", {"text": "x"}),
             f"A Node of this Loom is queued or running. {stop_or_wait(loom)}")
    assert await trees.read(loom) == before


# -- delete a Node -------------------------------------------------------------------------------------


async def test_a_delete_takes_the_node_and_every_node_under_it(trees: Trees) -> None:
    loom, crying, colour = await trees.guide_loom()
    under = await trees.add(loom, crying, " and")
    await trees.add(loom, under, " then")
    newer = await trees.make("Newer")
    after = await trees.ok("DELETE", f"/{loom['id']}/nodes/{crying}")
    assert [n["id"] for n in after["nodes"]] == [loom["nodes"][0]["id"], colour]
    assert after == await trees.read(loom)
    assert await trees.listed() == [loom["id"], newer["id"]]
    for gone in (crying, under):
        assert_error(await trees.call("DELETE", f"/{loom['id']}/nodes/{gone}"), 404, None,
                     message=f"None of the Nodes of this Loom has the id {gone}.")


async def test_the_guides_delete_answers_the_loom_without_them(trees: Trees) -> None:
    loom, crying, colour = await trees.guide_loom()
    await trees.ok("DELETE", f"/{loom['id']}/nodes/{crying}")
    after = await trees.ok("DELETE", f"/{loom['id']}/nodes/{colour}")
    assert after["nodes"] == loom["nodes"]


async def test_a_delete_of_the_root_gets_409(trees: Trees) -> None:
    loom = await trees.make()
    conflict(await trees.call("DELETE", f"/{loom['id']}/nodes/{loom['nodes'][0]['id']}"),
             f"This Node is a root of the Loom. Delete the Loom instead, with DELETE /v1/looms/{loom['id']}.")


@pytest.mark.parametrize("status", GROWING)
async def test_a_delete_while_a_node_to_delete_grows_gets_409(trees: Trees, status: NodeStatus) -> None:
    loom, crying, colour = await trees.guide_loom()
    growing = await trees.add(loom, await trees.add(loom, crying, " and"), "", status, request=REQUEST)
    message = ("A Node to delete is queued or running. Delete it when its Branch ends, or stop the Branch "
               f"with POST /v1/looms/{loom['id']}/cancel.")
    for node_id in (crying, growing):
        conflict(await trees.call("DELETE", f"/{loom['id']}/nodes/{node_id}"), message)
    # A Node beside it is deleted.
    assert colour not in by_id(await trees.ok("DELETE", f"/{loom['id']}/nodes/{colour}"))


# -- the cap -------------------------------------------------------------------------------------------


async def fill(trees: Trees, loom: dict, count: int) -> None:
    """`count` more Nodes under the root, written straight to the ledger."""
    root = uuid.UUID(loom["nodes"][0]["id"])
    async with trees.stack.services.ledger.write_sessions() as session:
        session.add_all(LoomNode(loom_id=uuid.UUID(loom["id"]), parent_id=root, position=10 + i, text=str(i))
                        for i in range(count))
        await session.commit()


async def test_a_split_or_a_sibling_past_2000_nodes_gets_409_saying_how_many_fit(trees: Trees) -> None:
    loom, crying, colour = await trees.guide_loom()
    await fill(trees, loom, 1996)
    after = await trees.ok("POST", f"/{loom['id']}/nodes/{crying}/sibling", {"text": " blue"})
    assert len(after["nodes"]) == 2000
    full = ("This Loom has 2000 Nodes, the most that a Loom holds, so no more fit. "
            "Delete Nodes to make room.")
    conflict(await trees.call("POST", f"/{loom['id']}/nodes/{crying}/sibling", {"text": "x"}), full)
    conflict(await trees.call("POST", f"/{loom['id']}/nodes/{crying}/split", {"offset": 2}), full)
    # An edit adds no Node; a delete makes room.
    await trees.ok("POST", f"/{loom['id']}/nodes/{crying}", {"text": " weeping"})
    await trees.ok("DELETE", f"/{loom['id']}/nodes/{colour}")
    assert len((await trees.ok("POST", f"/{loom['id']}/nodes/{crying}/split", {"offset": 2}))["nodes"]) == 2000


@pytest.mark.postgres
async def test_two_siblings_at_once_for_the_last_place_make_one_node(trees: Trees) -> None:
    """The Loom's lock serialises the check of the cap and the insert it allows."""
    loom, crying, _ = await trees.guide_loom()
    await fill(trees, loom, 1996)
    answers = await asyncio.gather(*(trees.call("POST", f"/{loom['id']}/nodes/{crying}/sibling", {"text": str(i)})
                                     for i in range(4)))
    assert sorted(r.status_code for r in answers) == [200, 409, 409, 409]
    assert len((await trees.read(loom))["nodes"]) == 2000


# -- bodies and ids ------------------------------------------------------------------------------------


TEXT_BODIES = [
    ({}, "text", "Missing required parameter: 'text'."),
    ({"text": None}, "text", "Missing required parameter: 'text'."),
    ({"text": 3}, "text", "Invalid type for 'text': expected a string."),
    ({"text": ["a"]}, "text", "Invalid type for 'text': expected a string."),
    ({"text": "a\x00b"}, "text", "A text cannot hold the character U+0000 (NUL)."),
    ({"text": "a", "offset": 1}, "offset", "Unknown parameter: 'offset'."),
    (["text"], None, "Invalid type for the request body: expected an object."),
]
SPLIT_BODIES = [
    ({}, "offset", "Missing required parameter: 'offset'."),
    ({"offset": None}, "offset", "Missing required parameter: 'offset'."),
    ({"offset": -1}, "offset", "Invalid value for 'offset': expected a value greater than or equal to 0."),
    ({"offset": True}, "offset", "Invalid type for 'offset': expected a number."),
    ({"offset": "7"}, "offset", "Invalid type for 'offset': expected a number."),
    ({"offset": 1.5}, "offset", "Invalid value for 'offset': expected a whole number."),
    ({"offset": 1, "text": 2}, "text", "Invalid type for 'text': expected a string."),
    ({"offset": 1, "text": "\x00"}, "text", "A text cannot hold the character U+0000 (NUL)."),
    ({"offset": 1, "position": 2}, "position", "Unknown parameter: 'position'."),
    ("offset", None, "Invalid type for the request body: expected an object."),
]


@pytest.mark.parametrize("route", ["", "/sibling", "root"])
@pytest.mark.parametrize("body, param, message", TEXT_BODIES)
async def test_a_text_body_is_checked_strictly(trees: Trees, route: str, body: Any, param: str | None,
                                               message: str) -> None:
    loom, crying, _ = await trees.guide_loom()
    before = await trees.read(loom)
    path = f"/{loom['id']}/root" if route == "root" else f"/{loom['id']}/nodes/{crying}{route}"
    assert_error(await trees.call("POST", path, body), 400, "invalid_request", param=param, message=message)
    assert await trees.read(loom) == before


@pytest.mark.parametrize("body, param, message", SPLIT_BODIES)
async def test_a_split_body_is_checked_strictly(trees: Trees, body: Any, param: str | None, message: str) -> None:
    loom, crying, _ = await trees.guide_loom()
    assert_error(await trees.call("POST", f"/{loom['id']}/nodes/{crying}/split", body), 400, "invalid_request",
                 param=param, message=message)
    assert len((await trees.read(loom))["nodes"]) == 3


async def test_a_whole_float_offset_is_an_integer(trees: Trees) -> None:
    loom, crying, _ = await trees.guide_loom()
    after = await trees.ok("POST", f"/{loom['id']}/nodes/{crying}/split", {"offset": 7.0})
    assert by_id(after)[crying]["text"] == " crying"


def change_calls(loom_id: str, node_id: str) -> list[tuple[str, str, Any]]:
    return [("POST", f"/{loom_id}/nodes/{node_id}", {"text": "x"}),
            ("POST", f"/{loom_id}/nodes/{node_id}/split", {"offset": 1}),
            ("POST", f"/{loom_id}/nodes/{node_id}/sibling", {"text": "x"}),
            ("DELETE", f"/{loom_id}/nodes/{node_id}", None)]


async def test_another_users_loom_and_an_unknown_node_get_404_ids_that_are_not_uuids_400(trees: Trees) -> None:
    loom, crying, _ = await trees.guide_loom()
    before = await trees.read(loom)
    stranger = await another_key(trees.stack, same_user=False)
    for method, path, body in [*change_calls(loom["id"], crying), ("POST", f"/{loom['id']}/root", {"text": "x"})]:
        assert_error(await trees.call(method, path, body, key=stranger), 404, None, param=None,
                     message=f"None of your Looms has the id {loom['id']}.")
    other = await trees.make("Another of mine")
    for node_id in (str(uuid.uuid4()), other["nodes"][0]["id"]):
        for method, path, body in change_calls(loom["id"], node_id):
            assert_error(await trees.call(method, path, body), 404, None, param=None,
                         message=f"None of the Nodes of this Loom has the id {node_id}.")
    # A path id that is not a UUID is not valid (DESIGN.md: every path id).
    for method, path, body in change_calls(loom["id"], "not-a-uuid"):
        assert_error(await trees.call(method, path, body), 400, "invalid_request", param="node_id")
    for method, path, body in change_calls("not-a-uuid", crying):
        assert_error(await trees.call(method, path, body), 400, "invalid_request", param="loom_id")
    assert await trees.read(loom) == before
