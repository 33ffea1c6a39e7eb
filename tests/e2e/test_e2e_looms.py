"""Looms end to end: the Serve application of the test profile (ingress, the tiny
model's real engine, the Runner in a replica process of its own), PostgreSQL,
and the guide's own curl commands ("Grow a Loom with the API"), read from the
spec's docs and run as they are. Every answer is checked against the spec's
schemas. Two clients branch one Loom at once, a stream stays open across
another client's Branch, the Runner is killed with SIGKILL while a Node runs,
and another User's ids get 404."""
from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from deployments.catalog import load_model_spec
from ledger.work.tables import LoomNode, Work
from tests.serve_fixtures import ServeInstance, holds, kill_runner
from tests.spec import spec_docs, validate

SERVED_NAME = "acs/tiny-llama-random"
ENDED = ("completed", "failed", "cancelled")
APP = "looms"
# The guide's bash blocks in the order it gives them, each with a piece that only it has.
GUIDE_BLOCKS = {
    "create": '{"prompt": "The sky is"}', "branch": "/branch", "read": '/looms/$LOOM_ID" \\\n-H',
    "stream": "curl -N", "split": "/split", "cancel": "/cancel", "list": '/looms" \\\n-H "Authorization',
    "rename": '"title": "Skies"', "delete_node": "-X DELETE \"$ACS_API_BASE/looms/$LOOM_ID/nodes",
    "delete_loom": '-X DELETE "$ACS_API_BASE/looms/$LOOM_ID" \\', "export": "/export", "import": "/looms/import",
}


# -- the guide's commands ------------------------------------------------------------------------

@functools.cache
def guide() -> dict[str, str]:
    docs = spec_docs()
    section = docs[docs.index("# Grow a Loom with the API (/docs/loom)"):docs.index("# Models (/docs/models)")]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    assert len(blocks) == len(GUIDE_BLOCKS), blocks
    commands = dict(zip(GUIDE_BLOCKS, blocks))
    for name, piece in GUIDE_BLOCKS.items():
        assert piece in commands[name], (name, commands[name])
    return commands


@pytest.fixture(scope="module")
def stack(serve_instance: ServeInstance) -> Iterator[tuple[str, str]]:
    with serve_instance.application("test", APP, "/looms") as base:
        yield base, serve_instance.new_key("looms")


@pytest.fixture(scope="module")
def other_key(serve_instance: ServeInstance, stack: tuple[str, str]) -> str:
    return serve_instance.new_key("looms-other")


def curl_output(stack: tuple[str, str], name: str, cwd: Path | None = None, command: str | None = None,
                **shell: str) -> str:
    """Run the guide's command `name` with ACS_API_BASE, ACS_API_KEY and the shell variables given
    (LOOM_ID, NODE_ID); what it printed."""
    base, key = stack
    env = {**os.environ, "ACS_API_BASE": base, "ACS_API_KEY": key, **shell}
    done = subprocess.run(["bash", "-c", command or guide()[name]], env=env, capture_output=True, text=True,
                          timeout=120, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


def curl(stack: tuple[str, str], name: str, cwd: Path | None = None, command: str | None = None,
         **shell: str) -> Any:
    """The guide's command's answer as JSON (None when it wrote a file)."""
    printed = curl_output(stack, name, cwd, command, **shell)
    return json.loads(printed) if printed.strip() else None


def sse_events(body: str) -> list[Any]:
    """A stream's events (comments dropped), each Node validated; the last one is [DONE]."""
    assert body.endswith("data: [DONE]\n\n"), body[-300:]
    events = []
    for block in body.split("\n\n")[:-1]:
        if block.startswith(":"):
            continue
        assert block.startswith("data: ") and "\n" not in block, block
        data = block[len("data: "):]
        events.append(data if data == "[DONE]" else json.loads(data))
    for event in events[:-1]:
        validate(event, "Node")
    assert events.count("[DONE]") == 1
    return events


def last_states(events: list[Any]) -> dict[str, dict]:
    """Each Node as the stream last sent it."""
    return {event["id"]: event for event in events if event != "[DONE]"}


# -- httpx for what the guide does not spell out -------------------------------------------------

def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def api(stack: tuple[str, str], method: str, path: str, key: str | None = None, **kwargs: Any) -> httpx.Response:
    base, own = stack
    return httpx.request(method, f"{base}{path}", headers=auth(key or own), timeout=60, **kwargs)


def make_loom(stack: tuple[str, str], prompt: str = "The sky is") -> dict:
    r = api(stack, "POST", "/looms", json={"prompt": prompt})
    assert r.status_code == 200, r.text
    return r.json()


def branch(stack: tuple[str, str], loom_id: str, parent_id: str, key: str | None = None, **fields: Any) -> list[dict]:
    r = api(stack, "POST", f"/looms/{loom_id}/nodes/{parent_id}/branch", key,
            json={"model": "llama-8b", "max_tokens": 4, **fields})
    assert r.status_code == 200, r.text
    validate(r.json(), "Branch")
    return r.json()["data"]


def read(stack: tuple[str, str], loom_id: str) -> dict:
    r = api(stack, "GET", f"/looms/{loom_id}")
    assert r.status_code == 200, r.text
    validate(r.json(), "Loom")
    return r.json()


def wait_ended(stack: tuple[str, str], loom_id: str, node_ids: list[str], timeout_s: float = 120) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        loom = read(stack, loom_id)
        nodes = {node["id"]: node for node in loom["nodes"]}
        if all(nodes[i]["status"] in ENDED for i in node_ids):
            return loom
        assert time.monotonic() < deadline, loom
        time.sleep(0.1)


# -- the ledger and the Runner, as test_e2e_jobs reaches them -------------------------------------

def node_row(serve_instance: ServeInstance, node_id: str) -> tuple[Any, Any]:
    async def query(session: Any) -> tuple[Any, Any]:
        node = await session.get(LoomNode, uuid.UUID(node_id))
        return node, await session.get(Work, node.work_id)
    return serve_instance.read_ledger(query)


def holds_of(serve_instance: ServeInstance, node_id: str) -> list[Any]:
    return holds(serve_instance, f"node-{uuid.UUID(node_id).hex}")


# -- the guide, step by step ------------------------------------------------------------------------

@functools.cache
def special_tokens() -> frozenset[str]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(load_model_spec("tiny-llama").tokenizer_path())
    return frozenset(token.content for token in tokenizer.added_tokens_decoder.values() if token.special)


def visible_characters(text: str) -> str:
    return "".join(text.replace("\ufffd", "").split())


def test_the_guides_commands(stack: tuple[str, str], tmp_path: Path) -> None:
    # Make a Loom.
    loom = curl(stack, "create")
    validate(loom, "Loom")
    (root,) = loom["nodes"]
    assert (loom["title"], loom["pinned"], root["status"], root["text"]) == ("", False, "completed", "The sky is")
    assert uuid.UUID(loom["id"]).version == 7 and uuid.UUID(root["id"]).version == 7
    ids = {"LOOM_ID": loom["id"], "NODE_ID": root["id"]}

    # Branch under the root, and follow it by its stream until it ends.
    made = curl(stack, "branch", **ids)
    validate(made, "Branch")
    first, second = made["data"]
    assert [node["status"] for node in made["data"]] == ["queued", "queued"]
    assert first["request"] == {"model": SERVED_NAME, "max_tokens": 2, "temperature": 1, "logprobs": 1, "top_p": 1,
                                "top_k": 0, "min_p": 0, "presence_penalty": 0, "frequency_penalty": 0,
                                "repetition_penalty": 1, "seed": first["request"]["seed"], "stop": None}
    assert second["request"] == {**first["request"], "seed": first["request"]["seed"] + 1}
    streamed = last_states(sse_events(curl_output(stack, "stream", **ids)))
    assert [streamed[node["id"]]["status"] for node in made["data"]] == ["completed", "completed"]

    # Follow it by reads: the same Nodes as the stream's last events.
    grown = curl(stack, "read", **ids)
    validate(grown, "Loom")
    assert grown["title"] == "The sky is"
    assert [node["id"] for node in grown["nodes"]] == [root["id"], first["id"], second["id"]]
    for node in grown["nodes"][1:]:
        assert node == streamed[node["id"]]
        assert node["status"] == "completed" and node["error"] is None
        logprobs = node["logprobs"]
        assert 1 <= len(logprobs["tokens"]) <= 2 and logprobs["text_offset"][0] == 0
        # A Node's text leaves the model's special tokens out, as vLLM's text does
        # (skip_special_tokens); its logprobs name every token sampled. The random
        # tiny model samples one of its 256 reserved tokens now and then. It also samples a lone
        # byte of a character now and then: vLLM's text shows it as U+FFFD, its logprobs' token
        # string leaves it out (seen: text '\ufffd_without', tokens joined '_without'). Its
        # incremental text and its token strings (each token decoded alone) differed once in a
        # space too (text '  junto', tokens joined ' junto'; not reproduced from the tokenizer
        # alone). So the two are compared without U+FFFD and whitespace: a lost, added or changed
        # word still fails.
        joined = "".join(t for t in logprobs["tokens"] if t not in special_tokens())
        assert visible_characters(joined) == visible_characters(node["text"])

    # The stream of an ended Branch: the three Nodes and [DONE] at once.
    assert sse_events(curl_output(stack, "stream", **ids)) == [*grown["nodes"], "[DONE]"]

    # List, rename and pin.
    listed = curl(stack, "list")
    validate(listed, "LoomList")
    summary = next(item for item in listed["data"] if item["id"] == loom["id"])
    assert (summary["title"], summary["prompt"], summary["pinned"]) == ("The sky is", "The sky is", False)
    renamed = curl(stack, "rename", **ids)
    validate(renamed, "Loom")
    assert (renamed["title"], renamed["pinned"]) == ("Skies", True)
    assert curl(stack, "list")["data"][0]["id"] == loom["id"]  # the pinned Loom comes first

    # Split the first new Node after 7 characters.
    text = grown["nodes"][1]["text"]
    split = curl(stack, "split", LOOM_ID=loom["id"], NODE_ID=first["id"])
    validate(split, "Loom")
    nodes = {node["id"]: node for node in split["nodes"]}
    (child,) = [node for node in split["nodes"] if node["parent_id"] == first["id"]]
    assert (nodes[first["id"]]["text"], child["text"]) == (text[:7], text[7:])
    assert child["request"]["seed"] is None

    # Delete the second new Node.
    pruned = curl(stack, "delete_node", LOOM_ID=loom["id"], NODE_ID=second["id"])
    validate(pruned, "Loom")
    assert second["id"] not in [node["id"] for node in pruned["nodes"]]
    assert [node["id"] for node in pruned["nodes"]] == [root["id"], first["id"], child["id"]]

    # Stop a Branch while it grows: the running Node keeps its text.
    (long,) = branch(stack, loom["id"], root["id"], max_tokens=1000)
    while (node := next(n for n in read(stack, loom["id"])["nodes"] if n["id"] == long["id"]))["text"] == "":
        assert node["status"] in ("queued", "running"), node
        time.sleep(0.05)
    stopped = curl(stack, "cancel", **ids)
    validate(stopped, "Loom")
    kept = next(n for n in stopped["nodes"] if n["id"] == long["id"])
    assert kept["status"] == "cancelled" and kept["text"].startswith(node["text"])
    assert curl(stack, "cancel", **ids) == stopped  # a stop when no Node grows changes nothing

    # Export, and import the file; then the guide's own file.
    assert curl(stack, "export", cwd=tmp_path, **ids) is None
    exported = json.loads((tmp_path / "loom.json").read_text())
    validate(exported, "LoomFile")
    command = guide()["import"]
    with_file = command.replace(command[command.index("-d '"):].rstrip("\n"), "-d @loom.json")
    imported = curl(stack, "import", cwd=tmp_path, command=with_file)
    validate(imported, "Loom")
    assert imported["id"] != loom["id"]
    before = read(stack, loom["id"])["nodes"]
    assert [(n["text"], n["status"], n["logprobs"]) for n in imported["nodes"]] == [
        (n["text"], n["status"], n["logprobs"]) for n in before]
    assert not {n["id"] for n in imported["nodes"]} & {n["id"] for n in before}
    skies = curl(stack, "import")
    validate(skies, "Loom")
    assert skies["title"] == "Skies"
    assert [(n["text"], n["status"]) for n in skies["nodes"]] == [("The sky is", "completed"), (" blue", "completed")]
    assert skies["nodes"][1]["parent_id"] == skies["nodes"][0]["id"]

    # Delete the Loom: gone at once.
    deleted = curl(stack, "delete_loom", **ids)
    validate(deleted, "DeletedLoom")
    assert deleted == {"id": loom["id"], "object": "loom", "deleted": True}
    gone = curl(stack, "read", **ids)
    validate(gone, "ErrorResponse")
    assert gone["error"]["code"] is None
    assert loom["id"] not in [item["id"] for item in curl(stack, "list")["data"]]


# -- two clients, one Loom ------------------------------------------------------------------------

def test_two_clients_branching_one_loom_at_once_lose_no_node(stack: tuple[str, str]) -> None:
    loom = make_loom(stack)
    root = loom["nodes"][0]["id"]
    made: dict[int, list[dict]] = {}
    start = threading.Barrier(2)

    def client(i: int) -> None:
        start.wait()
        made[i] = branch(stack, loom["id"], root, n=4, seed=100 * i)

    threads = [threading.Thread(target=client, args=(i,)) for i in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    ids = [[node["id"] for node in made[i]] for i in (1, 2)]
    grown = wait_ended(stack, loom["id"], ids[0] + ids[1])
    children = [node["id"] for node in grown["nodes"][1:]]
    # Each Branch's Nodes together, in the order they were made; none lost.
    assert children in (ids[0] + ids[1], ids[1] + ids[0])
    assert all(node["status"] == "completed" and node["text"] for node in grown["nodes"][1:])


def test_a_stream_held_open_sees_a_branch_that_another_client_starts(stack: tuple[str, str]) -> None:
    base, key = stack
    loom = make_loom(stack)
    root = loom["nodes"][0]["id"]
    (long,) = branch(stack, loom["id"], root, max_tokens=1000)  # still growing when theirs comes
    events: list[Any] = []
    running = threading.Event()

    def follow() -> None:
        with httpx.stream("GET", f"{base}/looms/{loom['id']}/stream", headers=auth(key), timeout=120) as response:
            assert response.status_code == 200
            body = ""
            for piece in response.iter_text():
                body += piece
                if '"status":"running"' in body:
                    running.set()
        events.extend(sse_events(body))

    follower = threading.Thread(target=follow)
    follower.start()
    assert running.wait(60)
    with httpx.Client(base_url=base, headers=auth(key), timeout=60) as another:
        r = another.post(f"/looms/{loom['id']}/nodes/{root}/branch",
                         json={"model": "llama-8b", "max_tokens": 4, "n": 2})
    assert r.status_code == 200, r.text
    theirs = [node["id"] for node in r.json()["data"]]
    follower.join(120)
    assert events and events[-1] == "[DONE]"
    final = read(stack, loom["id"])
    assert last_states(events) == {node["id"]: node for node in final["nodes"]}
    assert all(final_node["status"] == "completed" for final_node in final["nodes"])
    # Their Nodes came before [DONE]. Not necessarily as `queued`: a Runner with a free place
    # claims a Node within its 0.1 s poll, often before the stream's next 250 ms read.
    assert set(theirs) <= {event["id"] for event in events[:-1]}
    assert long["id"] in last_states(events)


# -- a restart in the middle of a Node --------------------------------------------------------------

def test_a_node_cut_by_a_runner_sigkill_runs_again_from_the_beginning_and_is_charged_once(
        stack: tuple[str, str], serve_instance: ServeInstance) -> None:
    base, key = stack
    loom = make_loom(stack)
    (node,) = branch(stack, loom["id"], loom["nodes"][0]["id"], max_tokens=1000, temperature=0)
    texts: list[str] = []
    grown = threading.Event()

    def follow() -> None:
        """The Node's text at each event of a stream that stays open across the restart."""
        with httpx.stream("GET", f"{base}/looms/{loom['id']}/stream", headers=auth(key), timeout=300) as response:
            for line in response.iter_lines():
                if line.startswith("data: {"):
                    event = json.loads(line[len("data: "):])
                    if event["id"] == node["id"]:
                        texts.append(event["text"])
                        # About 20 of its 1,000 tokens: the kill comes long before the Node's end,
                        # also on a loaded machine whose stream events come seconds apart.
                        if len(event["text"]) >= 100:
                            grown.set()

    follower = threading.Thread(target=follow)
    follower.start()
    assert grown.wait(120)
    mark = len(texts)
    before = max(texts[:mark], key=len)
    kill_runner(APP)
    follower.join(300)
    assert not follower.is_alive()
    # The next attempt started again from nothing: the stream saw the text shorter again.
    assert any(len(text) < len(before) for text in texts[mark:]), [len(text) for text in texts]
    done = next(n for n in read(stack, loom["id"])["nodes"] if n["id"] == node["id"])
    assert done["status"] == "completed" and done["text"] == texts[-1]
    assert done["text"].startswith(before)  # temperature 0: the same tokens again, from the beginning
    row, work = node_row(serve_instance, node["id"])
    assert (work.attempts, row.attempt, work.status.value) == (2, 2, "succeeded")
    spent = sorted((hold.state.value, hold.used, hold.source.value) for hold in holds_of(serve_instance, node["id"]))
    # The cut attempt cost nothing: one Hold settled, to the tokens of one whole run.
    assert spent == [("released", 0, "loom"), ("settled", 4 + 1000, "loom")]
    assert row.used_tokens == 4 + 1000  # "The sky is" and max_tokens, once


# -- the same seed -------------------------------------------------------------------------------

def test_a_nodes_request_sent_back_as_a_branch_gives_the_same_tokens(stack: tuple[str, str]) -> None:
    loom = make_loom(stack)
    root = loom["nodes"][0]["id"]
    (first,) = branch(stack, loom["id"], root, max_tokens=8, logprobs=1)
    sampled = next(n for n in wait_ended(stack, loom["id"], [first["id"]])["nodes"] if n["id"] == first["id"])
    r = api(stack, "POST", f"/looms/{loom['id']}/nodes/{root}/branch", json=sampled["request"])
    assert r.status_code == 200, r.text
    (again,) = r.json()["data"]
    assert again["request"] == sampled["request"]
    resampled = next(n for n in wait_ended(stack, loom["id"], [again["id"]])["nodes"] if n["id"] == again["id"])
    assert resampled["status"] == "completed"
    assert resampled["logprobs"]["tokens"] == sampled["logprobs"]["tokens"]
    assert resampled["text"] == sampled["text"]


# -- another User's ids ------------------------------------------------------------------------------

def test_another_users_ids_get_404_on_every_loom_route(stack: tuple[str, str], other_key: str) -> None:
    loom = make_loom(stack)
    node = loom["nodes"][0]["id"]
    path = f"/looms/{loom['id']}"
    routes = [
        ("GET", path, None), ("POST", path, {"title": "Mine"}), ("DELETE", path, None),
        ("GET", f"{path}/stream", None), ("GET", f"{path}/export", None), ("POST", f"{path}/cancel", None),
        ("POST", f"{path}/root", {"text": "Mine"}),
        ("POST", f"{path}/nodes/{node}/branch", {"model": "llama-8b"}),
        ("POST", f"{path}/nodes/{node}", {"text": "Mine"}), ("DELETE", f"{path}/nodes/{node}", None),
        ("POST", f"{path}/nodes/{node}/split", {"offset": 3}),
        ("POST", f"{path}/nodes/{node}/sibling", {"text": "Mine"}),
    ]
    for method, route, body in routes:
        r = api(stack, method, route, other_key, **({"json": body} if body is not None else {}))
        assert r.status_code == 404, (method, route, r.text)
        validate(r.json(), "ErrorResponse")
        assert (r.json()["error"]["code"], r.json()["request_id"]) == (None, r.headers["x-request-id"])
    assert read(stack, loom["id"])["nodes"] == loom["nodes"]  # nothing changed
    assert loom["id"] not in [item["id"] for item in api(stack, "GET", "/looms", other_key).json()["data"]]
