"""Export and import of a Loom file (version 2) through the routes, on the fake stack
(SQLite): the file's shape, the guide's rules for a file that you write yourself
(orphans, cycles, statuses, positions, the title, the cap, repeated ids), strict
reading of every field, and the round trip export -> import -> export."""
from __future__ import annotations

import uuid
from typing import Any

import pytest

from ledger.work.tables import NodeStatus
from tests.spec import assert_error, validate
from tests.unit.test_loom_changes import COLOUR, REQUEST, Trees, by_id, path_text
from tests.accounts import another_key

BRANCH = {"model": "llama-8b", "max_tokens": 2, "n": 2, "logprobs": 1, "seed": 7}
FAILURE = {"message": "Inference ended the stream before it was complete.", "type": "upstream_error",
           "param": None, "code": None, "retryable": True}


@pytest.fixture
def trees(fake_stack: Any) -> Trees:
    return Trees(fake_stack)


async def export(trees: Trees, loom: dict) -> dict:
    r = await trees.call("GET", f"/{loom['id']}/export")
    assert r.status_code == 200, r.text
    validate(r.json(), "LoomFile")
    return r.json()


async def imported(trees: Trees, file: Any) -> dict:
    return await trees.ok("POST", "/import", file)


def refused(r: Any, message: str, param: str | None = "nodes") -> None:
    assert_error(r, 400, "invalid_request", param=param, message=message)


def shape(loom: dict) -> list[tuple]:
    """Each Node's place in the tree, by its index in the read, and what it holds."""
    index = {node["id"]: i for i, node in enumerate(loom["nodes"])}
    return [(index.get(node["parent_id"]), node["text"], node["status"], node["logprobs"], node["error"],
             node["request"]) for node in loom["nodes"]]


# -- export --------------------------------------------------------------------------------------------


async def test_the_export_of_the_guides_loom(trees: Trees) -> None:
    loom, crying, colour = await trees.guide_loom()
    file = await export(trees, loom)
    root = loom["nodes"][0]["id"]
    assert list(file) == ["version", "node_order", "loom", "nodes"]
    assert file["version"] == 2 and isinstance(file["node_order"], str)
    assert file["loom"] == {"title": "", "model": None, "last_generation_config": None}
    assert file["nodes"] == [
        {"id": root, "parent_id": None, "text": "The sky is", "status": "completed", "position": 0,
         "generation_config": None, "logprobs": None, "error": None},
        {"id": crying, "parent_id": root, "text": " crying,", "status": "completed", "position": 0,
         "generation_config": REQUEST,
         "logprobs": [{"token": " crying", "logprob": -4.989488124847412,
                       "top": [{"token": " the", "logprob": -1.4269880056381226},
                               {"token": " crying", "logprob": -4.989488124847412}]},
                      {"token": ",", "logprob": -1.722730040550232,
                       "top": [{"token": ",", "logprob": -1.722730040550232}]}],
         "error": None},
        {"id": colour, "parent_id": root, "text": " the colour", "status": "completed", "position": 1,
         "generation_config": {**REQUEST, "seed": 1739262752},
         "logprobs": [{"token": " the", "logprob": -1.4269880056381226,
                       "top": [{"token": " the", "logprob": -1.4269880056381226}]},
                      {"token": " colour", "logprob": -5.764825344085693,
                       "top": [{"token": " limit", "logprob": -0.07732537388801575},
                               {"token": " colour", "logprob": -5.764825344085693}]}],
         "error": None},
    ]


async def test_the_export_holds_the_last_branch_the_marks_and_a_failed_nodes_error(trees: Trees) -> None:
    loom, crying, colour = await trees.guide_loom()
    root = loom["nodes"][0]["id"]
    r = await trees.call("POST", f"/{loom['id']}/nodes/{root}/branch", BRANCH)
    assert r.status_code == 200, r.text
    queued = [node["id"] for node in r.json()["data"]]
    failed = await trees.add(loom, colour, " bl", NodeStatus.failed, request=REQUEST, error=FAILURE)
    await trees.ok("POST", f"/{loom['id']}/nodes/{crying}/split", {"offset": 7})
    await trees.ok("POST", f"/{loom['id']}/nodes/{colour}", {"text": " the color"})
    file = await export(trees, loom)
    nodes = {node["id"]: node for node in file["nodes"]}
    assert file["loom"] == {"title": "The sky is", "model": "llama-8b",
                            "last_generation_config": {"model": "llama-8b", "n": 2, "max_tokens": 2, "temperature": 1,
                                                       "logprobs": 1, "top_p": 1, "top_k": 0, "min_p": 0,
                                                       "presence_penalty": 0, "frequency_penalty": 0,
                                                       "repetition_penalty": 1, "seed": 7, "stop": None}}
    assert nodes[crying]["generation_config"] == {**REQUEST, "slice_offset": 0, "slice_end": 7}
    (child,) = [node for node in file["nodes"] if node["parent_id"] == crying]
    assert child["generation_config"] == {**REQUEST, "seed": None, "slice_offset": 7, "slice_end": 8}
    assert nodes[colour]["generation_config"] == {**REQUEST, "seed": 1739262752, "text_modified": True}
    assert nodes[failed]["generation_config"] == {**REQUEST, "context_modified": True}
    assert (nodes[failed]["status"], nodes[failed]["error"]) == ("failed", FAILURE)
    # Queued Nodes go into the file as stopped ones: a file has no state that grows.
    assert [(nodes[n]["status"], nodes[n]["text"], nodes[n]["position"]) for n in queued] == [
        ("cancelled", "", 2), ("cancelled", "", 3)]
    # Parents first, in the order of a read.
    assert [node["id"] for node in file["nodes"]] == [node["id"] for node in (await trees.read(loom))["nodes"]]


async def test_an_export_of_another_users_loom_gets_404_and_of_an_id_that_is_not_a_uuid_400(trees: Trees) -> None:
    loom = await trees.make()
    stranger = await another_key(trees.stack, same_user=False)
    assert_error(await trees.call("GET", f"/{loom['id']}/export", key=stranger), 404, None,
                 message=f"None of your Looms has the id {loom['id']}.")
    assert_error(await trees.call("GET", "/not-a-uuid/export"), 400, "invalid_request", param="loom_id")
    await trees.call("DELETE", f"/{loom['id']}")
    assert_error(await trees.call("GET", f"/{loom['id']}/export"), 404, None)


# -- import: the guide's rules -------------------------------------------------------------------------


async def test_the_guides_file_makes_a_loom_of_two_nodes(trees: Trees) -> None:
    loom = await imported(trees, {"loom": {"title": "Skies"}, "nodes": [
        {"id": "a", "parent_id": None, "text": "The sky is"}, {"id": "b", "parent_id": "a", "text": " blue"}]})
    assert (loom["title"], loom["pinned"]) == ("Skies", False)
    root, blue = loom["nodes"]
    assert (root["parent_id"], root["text"], root["status"], root["request"]) == (None, "The sky is", "completed", None)
    assert (blue["parent_id"], blue["text"], blue["status"]) == (root["id"], " blue", "completed")
    assert all(uuid.UUID(node["id"]).version == 7 for node in loom["nodes"])
    assert loom == await trees.read(loom)
    assert (await trees.listed())[0] == loom["id"]


async def test_each_import_gives_new_ids(trees: Trees) -> None:
    file = {"nodes": [{"id": "a", "text": "x"}]}
    first, second = await imported(trees, file), await imported(trees, file)
    assert first["id"] != second["id"] and first["nodes"][0]["id"] != second["nodes"][0]["id"]


async def test_a_node_keeps_its_status_and_one_without_is_completed(trees: Trees) -> None:
    loom = await imported(trees, {"nodes": [
        {"id": "r", "text": "The sky is"},
        {"id": "c", "parent_id": "r", "text": " gr", "status": "cancelled"},
        {"id": "f", "parent_id": "r", "text": " bl", "status": "failed", "error": {**FAILURE, "request_id": "req-1"}},
        {"id": "n", "parent_id": "r", "text": " red", "status": None},
        {"id": "e", "parent_id": "r", "text": " pink", "error": FAILURE}]})
    assert [(node["status"], node["error"]) for node in loom["nodes"]] == [
        ("completed", None), ("cancelled", None), ("failed", FAILURE), ("completed", None), ("completed", None)]


@pytest.mark.parametrize("status", ["queued", "running", "done", 3])
async def test_a_status_that_is_not_an_end_gets_400(trees: Trees, status: Any) -> None:
    message = ("Invalid type for 'nodes[1].status': expected a string or null." if status == 3 else
               "Invalid value for 'nodes[1].status': expected 'completed', 'cancelled', 'failed', or null.")
    refused(await trees.call("POST", "/import", {"nodes": [{"id": "r"}, {"id": "a", "parent_id": "r",
                                                                         "status": status}]}), message)


async def test_siblings_keep_the_order_of_their_position_and_without_one_their_place_in_the_file(trees: Trees) -> None:
    loom = await imported(trees, {"nodes": [
        {"id": "r", "text": "R"},
        {"id": "c", "parent_id": "r", "text": "c", "position": 2},
        {"id": "a", "parent_id": "r", "text": "a", "position": 0},
        {"id": "b", "parent_id": "r", "text": "b", "position": 1},
        {"id": "a1", "parent_id": "a", "text": "a1"},
        {"id": "a0", "parent_id": "a", "text": "a0", "position": 0},
        {"id": "a2", "parent_id": "a", "text": "a2"}]})
    assert [node["text"] for node in loom["nodes"]] == ["R", "a", "a1", "a0", "a2", "b", "c"]


async def test_an_orphan_goes_under_the_files_one_root(trees: Trees) -> None:
    loom = await imported(trees, {"nodes": [
        {"id": "o", "parent_id": "gone", "text": " orphan"},
        {"id": "r", "parent_id": None, "text": "Root"},
        {"id": "b", "parent_id": "r", "text": " child"}]})
    assert [(node["text"], node["parent_id"]) for node in loom["nodes"]] == [
        ("Root", None), (" orphan", loom["nodes"][0]["id"]), (" child", loom["nodes"][0]["id"])]


async def test_an_orphan_becomes_a_root_when_the_file_has_several_roots_or_none(trees: Trees) -> None:
    loom = await imported(trees, {"nodes": [
        {"id": "r1", "text": "One"}, {"id": "r2", "text": "Two"}, {"id": "o", "parent_id": "gone", "text": "Orphan"}]})
    assert [(node["text"], node["parent_id"]) for node in loom["nodes"]] == [
        ("One", None), ("Two", None), ("Orphan", None)]
    loom = await imported(trees, {"nodes": [
        {"id": "o1", "parent_id": "x", "text": "A"}, {"id": "o2", "parent_id": "o1", "text": "B"}]})
    assert [(node["text"], node["parent_id"]) for node in loom["nodes"]] == [("A", None), ("B", loom["nodes"][0]["id"])]


async def test_a_node_whose_parents_lead_back_to_itself_becomes_a_root(trees: Trees) -> None:
    loom = await imported(trees, {"nodes": [
        {"id": "r", "text": "Root"},
        {"id": "a", "parent_id": "b", "text": "A"},
        {"id": "b", "parent_id": "a", "text": "B"},
        {"id": "s", "parent_id": "s", "text": "Self"},
        {"id": "c", "parent_id": "e", "text": "C"},  # leads into the cycle d <-> e, not back to itself
        {"id": "d", "parent_id": "e", "text": "D"},
        {"id": "e", "parent_id": "d", "text": "E"}]})
    nodes = {node["text"]: node for node in loom["nodes"]}
    assert [node["text"] for node in loom["nodes"] if node["parent_id"] is None] == ["Root", "A", "Self", "D"]
    assert nodes["B"]["parent_id"] == nodes["A"]["id"]
    assert nodes["E"]["parent_id"] == nodes["D"]["id"] and nodes["C"]["parent_id"] == nodes["E"]["id"]
    # The read holds each Node once, after its parent.
    assert sorted(node["text"] for node in loom["nodes"]) == sorted(nodes)
    assert path_text(loom, nodes["C"]["id"]) == "DEC"


@pytest.mark.parametrize("loom, title", [
    ({"title": "  Skies \n"}, "Skies"),
    ({"title": "x" * 130}, "x" * 120),
    ({"title": " " + "é" * 125}, "é" * 120),
    ({"title": ""}, "Imported loom"),
    ({"title": "   "}, "Imported loom"),
    ({"title": None}, "Imported loom"),
    ({}, "Imported loom"),
    (None, "Imported loom"),
    ({"title": "Skies", "model": "llama-8b", "last_generation_config": {"n": 2}}, "Skies"),
])
async def test_the_title_is_trimmed_and_cut_to_120_and_none_is_imported_loom(trees: Trees, loom: Any,
                                                                             title: str) -> None:
    file = {"version": 2, "node_order": "parents_first", "loom": loom, "nodes": [{"id": "a", "text": "x"}]}
    assert (await imported(trees, file))["title"] == title


async def test_a_file_of_2000_nodes_imports_and_one_of_2001_gets_400(trees: Trees) -> None:
    nodes = [{"id": "r", "text": "R"}] + [{"id": str(i), "parent_id": "r", "text": str(i)} for i in range(1999)]
    assert len((await imported(trees, {"nodes": nodes}))["nodes"]) == 2000
    before = await trees.listed()
    refused(await trees.call("POST", "/import", {"nodes": nodes + [{"id": "one more"}]}),
            "A Loom holds at most 2000 Nodes, and the file has 2001. Split it into several files.")
    assert await trees.listed() == before


async def test_two_nodes_of_the_same_id_get_400(trees: Trees) -> None:
    refused(await trees.call("POST", "/import", {"nodes": [{"id": "a"}, {"id": "b", "parent_id": "a"}, {"id": "a"}]}),
            "Two Nodes of the file have the id 'a'. Give each Node its own id.")


# -- import: a Node's request, marks and log probabilities ----------------------------------------------


async def test_the_request_keeps_the_branch_fields_of_generation_config_in_their_order(trees: Trees) -> None:
    config = {"stop": ["\n"], "seed": 3, "temperature": 5, "n": 4, "echo": True, "model": "meta-llama/Llama-3.1-8B",
              "max_tokens": 7, "best_of": 2, "text_modified": True}
    loom = await imported(trees, {"nodes": [{"id": "a", "text": "x", "generation_config": config}]})
    request = loom["nodes"][0]["request"]
    assert request == {"model": "meta-llama/Llama-3.1-8B", "max_tokens": 7, "temperature": 5, "seed": 3,
                       "stop": ["\n"]}
    assert list(request) == ["model", "max_tokens", "temperature", "seed", "stop"]


async def test_the_nodes_own_model_and_seed_stand_in_for_those_of_generation_config(trees: Trees) -> None:
    loom = await imported(trees, {"nodes": [
        {"id": "a", "text": "x", "model": "llama-8b", "seed": 12},
        {"id": "b", "text": "y", "model": "llama-8b", "seed": 12, "generation_config": {"model": "m", "seed": None}},
        {"id": "c", "text": "z", "seed": 12},
        {"id": "d", "text": "w", "generation_config": {"temperature": 1}}]})
    assert [node["request"] for node in loom["nodes"]] == [
        {"model": "llama-8b", "seed": 12}, {"model": "m", "seed": None}, None, None]


@pytest.mark.parametrize("config", [
    {"temperature": "hot"}, {"max_tokens": 2.5}, {"max_tokens": 40000}, {"logprobs": 101}, {"logprobs": True},
    {"seed": -1}, {"top_k": "0"}, {"stop": ["a", "b", "c", "d", "e"]}, {"stop": 3}, {"model": 8},
    {"stop": "a\x00"},
])
async def test_a_node_whose_fields_no_longer_read_as_branch_fields_has_no_request(trees: Trees,
                                                                                   config: dict) -> None:
    file = {"nodes": [{"id": "a", "text": "x", "generation_config": {**REQUEST, **config}}]}
    assert (await imported(trees, file))["nodes"][0]["request"] is None


async def test_null_fields_of_generation_config_and_whole_floats(trees: Trees) -> None:
    config = {**REQUEST, "temperature": None, "max_tokens": 2.0, "logprobs": None, "stop": None}
    (node,) = (await imported(trees, {"nodes": [{"id": "a", "text": "x", "generation_config": config}]}))["nodes"]
    assert node["request"] == {key: value for key, value in {**REQUEST, "logprobs": None}.items()
                               if key != "temperature"}
    assert type(node["request"]["max_tokens"]) is int


async def test_logprobs_in_the_file_become_the_nodes_with_offsets_within_the_node(trees: Trees) -> None:
    logprobs = [{"token": " cry", "logprob": -1.5, "top": [{"token": " the", "logprob": -0.5},
                                                          {"token": " cry", "logprob": -1.5}]},
                {"token": "ing", "logprob": None, "top": None},
                {"token": ",", "logprob": -0.25}]
    (node,) = (await imported(trees, {"nodes": [{"id": "a", "text": " crying,", "logprobs": logprobs}]}))["nodes"]
    assert node["logprobs"] == {"text_offset": [0, 4, 7], "token_logprobs": [-1.5, None, -0.25],
                                "tokens": [" cry", "ing", ","],
                                "top_logprobs": [{" the": -0.5, " cry": -1.5}, None, None]}


async def test_the_old_platforms_fields_are_read_and_not_kept(trees: Trees) -> None:
    node = {"id": "a", "text": "x", "generation_id": "gen-1", "choice_index": 0, "created_at": "2026-01-01T00:00:00Z",
            "finish_reason": "length", "stop_reason": None, "n_tokens": 1, "usage_source": "loom", "api_key_id": 9}
    (read,) = (await imported(trees, {"version": 2, "node_order": "bfs", "nodes": [node]}))["nodes"]
    assert (read["text"], read["status"], read["request"]) == ("x", "completed", None)


# -- import: strict reading ----------------------------------------------------------------------------


@pytest.mark.parametrize("file, param, message", [
    ([], None, "Invalid type for the request body: expected an object."),
    ({}, "nodes", "Missing required parameter: 'nodes'."),
    ({"nodes": None}, "nodes", "Missing required parameter: 'nodes'."),
    ({"nodes": {}}, "nodes", "Invalid type for 'nodes': expected a list of objects."),
    ({"nodes": []}, "nodes", "Invalid value for 'nodes': expected at least one Node, the root."),
    ({"nodes": [{"id": "a"}], "title": "x"}, "title", "Unknown parameter: 'title'."),
    ({"nodes": [{"id": "a"}], "loom": "x"}, "loom", "Invalid type for 'loom': expected an object."),
    ({"nodes": [{"id": "a"}], "loom": {"name": "x"}}, "loom", "Unknown parameter: 'loom.name'."),
    ({"nodes": [{"id": "a"}], "loom": {"title": 3}}, "loom",
     "Invalid type for 'loom.title': expected a string or null."),
    ({"nodes": ["a"]}, "nodes", "Invalid type for 'nodes[0]': expected an object."),
    ({"nodes": [{"text": "x"}]}, "nodes", "Missing required parameter: 'nodes[0].id'."),
    ({"nodes": [{"id": 1}]}, "nodes", "Invalid type for 'nodes[0].id': expected a string."),
    ({"nodes": [{"id": ""}]}, "nodes", "Invalid value for 'nodes[0].id': expected a non-empty string."),
    ({"nodes": [{"id": "a", "children": []}]}, "nodes", "Unknown parameter: 'nodes[0].children'."),
    ({"nodes": [{"id": "a", "parent_id": 2}]}, "nodes",
     "Invalid type for 'nodes[0].parent_id': expected a string or null."),
    ({"nodes": [{"id": "a", "text": 2}]}, "nodes", "Invalid type for 'nodes[0].text': expected a string."),
    ({"nodes": [{"id": "a", "text": "x\x00"}]}, "nodes", "A text cannot hold the character U+0000 (NUL)."),
    ({"nodes": [{"id": "a", "position": -1}]}, "nodes",
     "Invalid value for 'nodes[0].position': expected a value greater than or equal to 0."),
    ({"nodes": [{"id": "a", "position": 2**31}]}, "nodes",
     "Invalid value for 'nodes[0].position': expected a value less than or equal to 2147483647."),
    ({"nodes": [{"id": "a", "position": "1"}]}, "nodes",
     "Invalid type for 'nodes[0].position': expected a number or null."),
    ({"nodes": [{"id": "a", "seed": -1}]}, "nodes",
     "Invalid value for 'nodes[0].seed': expected a value greater than or equal to 0."),
    ({"nodes": [{"id": "a", "model": 3}]}, "nodes", "Invalid type for 'nodes[0].model': expected a string or null."),
    ({"nodes": [{"id": "a", "generation_config": []}]}, "nodes",
     "Invalid type for 'nodes[0].generation_config': expected an object or null."),
    ({"nodes": [{"id": "a", "logprobs": {}}]}, "nodes",
     "Invalid type for 'nodes[0].logprobs': expected a list of objects or null."),
    ({"nodes": [{"id": "a", "logprobs": [{"token": "x"}]}]}, "nodes",
     "Missing required parameter: 'nodes[0].logprobs[0].logprob'."),
    ({"nodes": [{"id": "a", "logprobs": [{"logprob": -1}]}]}, "nodes",
     "Missing required parameter: 'nodes[0].logprobs[0].token'."),
    ({"nodes": [{"id": "a", "logprobs": [{"token": "x", "logprob": "-1"}]}]}, "nodes",
     "Invalid type for 'nodes[0].logprobs[0].logprob': expected a number or null."),
    ({"nodes": [{"id": "a", "logprobs": [{"token": "x", "logprob": -1, "offset": 0}]}]}, "nodes",
     "Unknown parameter: 'nodes[0].logprobs[0].offset'."),
    ({"nodes": [{"id": "a", "logprobs": [{"token": "x", "logprob": -1, "top": {"x": -1}}]}]}, "nodes",
     "Invalid type for 'nodes[0].logprobs[0].top': expected a list of objects or null."),
    ({"nodes": [{"id": "a", "logprobs": [{"token": "x", "logprob": -1, "top": [{"token": "x"}]}]}]}, "nodes",
     "Missing required parameter: 'nodes[0].logprobs[0].top[0].logprob'."),
    ({"nodes": [{"id": "a", "logprobs": [{"token": "x", "logprob": -1, "top": [{"token": 1, "logprob": -1}]}]}]},
     "nodes", "Invalid type for 'nodes[0].logprobs[0].top[0].token': expected a string."),
])
async def test_every_field_of_the_file_is_read_strictly(trees: Trees, file: Any, param: str | None,
                                                        message: str) -> None:
    before = await trees.listed()
    refused(await trees.call("POST", "/import", file), message, param)
    assert await trees.listed() == before


# -- the round trip ------------------------------------------------------------------------------------


async def rich_loom(trees: Trees) -> dict:
    """A Loom with each kind of Node: samples with log probabilities, a split, an edit, a
    failed and a stopped Node, a sibling, a Node deleted from between its siblings."""
    loom, crying, colour = await trees.guide_loom()
    await trees.ok("POST", f"/{loom['id']}/nodes/{crying}/split", {"offset": 7})
    gone = await trees.add(loom, colour, " gone")
    await trees.add(loom, colour, " bl", NodeStatus.failed, request={**REQUEST, "stop": ["\n", "."]}, error=FAILURE)
    stopped = await trees.add(loom, colour, " grey and", NodeStatus.cancelled, request=REQUEST)
    await trees.add(loom, stopped, " then", logprobs={**COLOUR, "tokens": [" th", "en"], "text_offset": [0, 3]})
    await trees.ok("DELETE", f"/{loom['id']}/nodes/{gone}")
    await trees.ok("POST", f"/{loom['id']}/nodes/{colour}", {"text": " the color"})
    await trees.ok("POST", f"/{loom['id']}/nodes/{stopped}/sibling", {"text": " blue\n"})
    await trees.ok("POST", f"/{loom['id']}", {"title": "Skies"})
    return await trees.read(loom)


def without_ids(file: dict) -> dict:
    index = {node["id"]: i for i, node in enumerate(file["nodes"])}
    nodes = [{**node, "id": index[node["id"]], "parent_id": index.get(node["parent_id"])} for node in file["nodes"]]
    return {**file, "nodes": nodes}


async def test_export_import_export_gives_the_same_file_ids_aside(trees: Trees) -> None:
    loom = await rich_loom(trees)
    first = await export(trees, loom)
    again = await imported(trees, first)
    assert shape(again) == shape(loom)
    second = await export(trees, again)
    assert without_ids(second)["nodes"] == without_ids(first)["nodes"]
    # The API does not keep the last Branch's settings of a file.
    assert second["loom"] == {**first["loom"], "model": None, "last_generation_config": None}
    assert {node["id"] for node in second["nodes"]}.isdisjoint(node["id"] for node in first["nodes"])
    # The imported Loom takes changes as the first did.
    (split_child,) = [node for node in again["nodes"] if node["text"] == ","]
    after = await trees.ok("POST", f"/{again['id']}/nodes/{split_child['id']}", {"text": "!"})
    assert by_id(after)[split_child["id"]]["text"] == "!"


async def test_a_round_trip_keeps_several_roots_and_the_marks(trees: Trees) -> None:
    file = {"loom": {"title": "Two"}, "nodes": [
        {"id": "r1", "text": "One", "position": 1},
        {"id": "r2", "text": "Two", "position": 0},
        {"id": "a", "parent_id": "r1", "text": " a", "generation_config": {
            "model": "m", "text_modified": True, "context_modified": True, "slice_offset": 2, "slice_end": 4}}]}
    first = await export(trees, await imported(trees, file))
    assert [(node["text"], node["position"]) for node in first["nodes"]] == [("Two", 0), ("One", 1), (" a", 0)]
    assert first["nodes"][2]["generation_config"] == {"model": "m", "text_modified": True, "context_modified": True,
                                                      "slice_offset": 2, "slice_end": 4}
    second = await export(trees, await imported(trees, first))
    assert without_ids(second)["nodes"] == without_ids(first)["nodes"]
