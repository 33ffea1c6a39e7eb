"""The App's Loom routes (/account/looms) on the fake engine with in-process Runners on PostgreSQL:
each /v1/looms route for the App's session and CSRF token, over the same logic, so each answers as
its /v1 route does; a Branch that runs with no API key, counts against the App's 600 a minute of
the User, and shows in the Loom's stream; the import's " (imported)"; a refusal that names the page's
Stop button where /v1's names its route (spec: "Use the Loom page", Limits). The Loom logic itself is tested through /v1 in test_looms.py, test_loom_nodes.py,
test_loom_changes.py, test_loom_files.py and test_loom_stream.py.

The fake engine writes tokens " t1000", " t1001", ...; "The sky is" is 4 tokens.
"""
from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta
from typing import Any, Callable

import httpx
import pytest
import pytest_asyncio
from sqlalchemy import update
from sqlmodel import col, select

from domain.traffic.limits import BucketPolicy
from ledger.accounts.keys import create_api_key, set_key_status
from ledger.accounts.tables import AppSession, KeyStatus
from ledger.store.coltypes import utcnow
from ledger.tokens.tables import HoldState, UsageSource
from ledger.work import looms
from ledger.work.tables import NodeStatus, Work, WorkKind, WorkStatus
from tests.account_fixtures import browser_client
from tests.own_account import sign_in
from tests.spec import assert_error, validate
from tests.unit.test_jobs import jobs  # noqa: F401 - the fixture under `playground`
from tests.unit.test_playground_runs import DONE, SKY, Playground, events_of, fake_text, playground  # noqa: F401
from tests.waiting import wait_until

pytestmark = pytest.mark.postgres

BRANCH = {"model": "llama-8b", "max_tokens": 2, "n": 2, "logprobs": 1}


@dataclasses.dataclass
class AppLooms(Playground):
    """The Playground's stack, Runners and signed-in User, with an API key of the same User for the
    /v1 routes that each App route is held to."""

    async def call(self, method: str, path: str, body: Any = None, **headers: str) -> httpx.Response:
        kwargs = {} if body is None else {"json": body}
        return await self.account.browser.request(method, f"/account/looms{path}", headers=headers, **kwargs)

    async def api(self, method: str, path: str, body: Any = None, **headers: str) -> httpx.Response:
        kwargs = {} if body is None else {"json": body}
        auth = {"Authorization": f"Bearer {self.account.key}", **headers}
        return await self.stack.http.request(method, f"/v1/looms{path}", headers=auth, **kwargs)

    async def ok(self, method: str, path: str, body: Any = None, schema: str | None = "Loom") -> Any:
        r = await self.call(method, path, body)
        assert r.status_code == 200, r.text
        if schema is not None:
            validate(r.json(), schema)
        return r.json()

    async def make(self, prompt: str = "The sky is") -> dict:
        return await self.ok("POST", "", {"prompt": prompt})

    async def branch(self, loom: dict, body: dict | None = None, node_id: str | None = None) -> list[dict]:
        node_id = node_id or loom["nodes"][0]["id"]
        return (await self.ok("POST", f"/{loom['id']}/nodes/{node_id}/branch", body or BRANCH, "Branch"))["data"]

    async def read(self, loom_id: str) -> dict:
        """The App's read less `last_branch`, its one field more than the API's (its own test below)."""
        loom = await self.ok("GET", f"/{loom_id}", schema=None)
        del loom["last_branch"]
        validate(loom, "Loom")
        return loom

    async def api_read(self, loom_id: str) -> dict:
        r = await self.api("GET", f"/{loom_id}")
        assert r.status_code == 200, r.text
        return r.json()

    async def grown(self, loom_id: str) -> dict:
        """The Loom once none of its Nodes grows."""
        return await self.read_when(loom_id, lambda node: node["status"] not in ("queued", "running"))

    async def read_when(self, loom_id: str, holds: Callable[[dict], bool]) -> dict:
        """The Loom once each Node but the root `holds`."""
        read: dict = {}

        async def settled() -> bool:
            read.update(await self.read(loom_id))
            return all(holds(node) for node in read["nodes"][1:])

        await wait_until(settled, timeout_s=10.0, interval_s=0.02)
        return read


@pytest_asyncio.fixture
async def app_looms(playground: Playground) -> AppLooms:
    """The Playground's fixture (its work table empty, its Runners stopped at the end); its User signed
    in to the App, with an API key made on API Keys for the /v1 routes."""
    account = playground.account
    account.key = (await account.ok("POST", "/account/keys", {"name": "laptop"}, status=201))["key"]
    return AppLooms(playground.stack, playground.runners, account)


def error_of(r: httpx.Response) -> tuple[int, dict]:
    validate(r.json(), "ErrorResponse")
    return r.status_code, r.json()["error"]


# -- the routes answer as their /v1 routes do ------------------------------------------------------------


async def test_a_loom_made_renamed_pinned_and_deleted_in_the_app_is_the_one_the_api_reads(
        app_looms: AppLooms) -> None:
    loom = await app_looms.make("The sky is")
    assert (loom["title"], loom["pinned"], [node["text"] for node in loom["nodes"]]) == ("", False, ["The sky is"])
    assert await app_looms.api_read(loom["id"]) == loom == await app_looms.read(loom["id"])
    listed = await app_looms.ok("GET", "", schema="LoomList")
    assert listed == (await app_looms.api("GET", "")).json()
    assert [summary["id"] for summary in listed["data"]] == [loom["id"]]
    changed = await app_looms.ok("POST", f"/{loom['id']}", {"title": "  Skies  ", "pinned": True})
    assert (changed["title"], changed["pinned"]) == ("Skies", True)
    assert await app_looms.api_read(loom["id"]) == changed
    deleted = await app_looms.ok("DELETE", f"/{loom['id']}", schema="DeletedLoom")
    assert deleted == {"id": loom["id"], "object": "loom", "deleted": True}
    message = f"None of your Looms has the id {loom['id']}."
    assert_error(await app_looms.call("GET", f"/{loom['id']}"), 404, None, message=message)
    assert_error(await app_looms.api("GET", f"/{loom['id']}"), 404, None, message=message)


# Every App Loom route, with a body that it takes.
ROUTES = [
    ("GET", "", None),
    ("POST", "", {"prompt": "The sky is"}),
    ("POST", "/import", {"nodes": [{"id": "a", "parent_id": None, "text": "x", "status": "completed"}]}),
    ("GET", "/{loom}/export", None),
    ("GET", "/{loom}", None),
    ("POST", "/{loom}", {"title": "x"}),
    ("DELETE", "/{loom}", None),
    ("GET", "/{loom}/stream", None),
    ("POST", "/{loom}/cancel", None),
    ("POST", "/{loom}/nodes/{node}/branch", {"model": "llama-8b", "max_tokens": 2}),
    ("POST", "/{loom}/root", {"text": "x"}),
    ("POST", "/{loom}/nodes/{node}", {"text": "x"}),
    ("DELETE", "/{loom}/nodes/{node}", None),
    ("POST", "/{loom}/nodes/{node}/split", {"offset": 1}),
    ("POST", "/{loom}/nodes/{node}/sibling", {"text": "x"}),
]


# Each a request that its /v1 route refuses; `{loom}` and `{node}` a Loom of the User and its root.
REFUSED = [
    ("POST", "", {}),
    ("POST", "", {"prompt": 3}),
    ("POST", "", {"prompt": "a", "title": "x"}),
    ("POST", "", [1]),
    ("GET", "/not-a-uuid", None),
    ("GET", f"/{uuid.uuid4()}", None),
    ("GET", f"/{uuid.uuid4()}/export", None),
    ("POST", "/{loom}", {"title": 3}),
    ("POST", "/{loom}", {"pinned": "yes"}),
    ("DELETE", "/not-a-uuid", None),
    ("POST", f"/{uuid.uuid4()}/cancel", None),
    ("POST", "/{loom}/nodes/{node}/branch", {"model": "gpt-4"}),
    ("POST", "/{loom}/nodes/{node}/branch", {"model": "llama-8b", "temperature": 9}),
    ("POST", "/{loom}/nodes/{node}/branch", {"model": "llama-8b", "n": 9}),
    ("POST", "/{loom}/nodes/{node}/branch", {"model": "llama-8b", "bogus": 1}),
    ("POST", "/{loom}/nodes/" + str(uuid.uuid4()) + "/branch", {"model": "llama-8b"}),
    ("POST", "/{loom}/root", {}),
    ("POST", "/{loom}/nodes/{node}", {"text": 3}),
    ("POST", "/{loom}/nodes/{node}/split", {"offset": -1}),
    ("POST", "/{loom}/nodes/{node}/split", {"offset": "1"}),
    ("POST", "/import", {}),
    ("POST", "/import", {"version": 2, "nodes": []}),
    ("POST", "/import", {"nodes": [{"id": "a", "text": "x", "status": "grown"}]}),
]


@pytest.mark.parametrize("method,path,body", REFUSED, ids=lambda value: repr(value)[:60])
async def test_a_request_that_the_api_refuses_gets_the_same_error_in_the_app(app_looms: AppLooms, method: str,
                                                                               path: str, body: Any) -> None:
    loom = await app_looms.make()
    path = path.format(loom=loom["id"], node=loom["nodes"][0]["id"])
    in_app = error_of(await app_looms.call(method, path, body))
    assert in_app == error_of(await app_looms.api(method, path, body))
    assert 400 <= in_app[0] < 500
    assert [summary["id"] for summary in (await app_looms.ok("GET", "", schema="LoomList"))["data"]] == [loom["id"]]
    assert await app_looms.read(loom["id"]) == loom  # nothing changed


async def test_another_users_loom_is_a_404_on_every_route(app_looms: AppLooms) -> None:
    loom = await app_looms.make()
    root = loom["nodes"][0]["id"]
    stranger = await sign_in(app_looms.stack, key_name=None)
    for method, path, body in ROUTES:
        path = path.format(loom=loom["id"], node=root)
        if path in ("", "/import"):  # no Loom in the path
            continue
        r = await stranger.call(method, f"/account/looms{path}", body)
        assert_error(r, 404, None, message=f"None of your Looms has the id {loom['id']}.")
    assert (await stranger.ok("GET", "/account/looms"))["data"] == []
    assert await app_looms.read(loom["id"]) == loom


def test_the_table_has_every_app_loom_route(app_looms: AppLooms) -> None:
    served = {(method, route.path.removeprefix("/account/looms").replace("{loom_id}", "{loom}")
               .replace("{node_id}", "{node}"))
              for route in app_looms.stack.app.routes if getattr(route, "path", "").startswith("/account/looms")
              for method in route.methods}
    assert served == {(method, path) for method, path, _ in ROUTES}


async def test_each_route_takes_a_session_and_each_write_the_csrf_token(app_looms: AppLooms) -> None:
    loom = await app_looms.make()
    no_session = await browser_client(app_looms.stack)  # the App's CSRF cookie, and no session
    csrf = {"X-CSRF-Token": no_session.cookies.get("acs_csrf") or ""}
    for method, path, body in ROUTES:
        path = "/account/looms" + path.format(loom=loom["id"], node=loom["nodes"][0]["id"])
        kwargs = {} if body is None else {"json": body}
        assert_error(await no_session.request(method, path, headers=csrf, **kwargs), 401, "session_ended")
        r = await no_session.request(method, path, headers={**csrf, **app_looms.stack.auth()}, **kwargs)
        assert_error(r, 401, "session_required")  # an API key is no session
        if method != "GET":
            r = await app_looms.account.browser.http.request(method, path, **kwargs)  # no X-CSRF-Token
            assert_error(r, 403, "csrf_failed")
    assert [summary["id"] for summary in (await app_looms.ok("GET", "", schema="LoomList"))["data"]] == [loom["id"]]
    assert await app_looms.read(loom["id"]) == loom
    assert [row for row in await app_looms.rows() if row.kind == WorkKind.node] == []


async def test_without_an_idempotency_key_each_create_is_a_loom_and_with_one_a_retry_is_the_first(
        app_looms: AppLooms) -> None:
    first, second = await app_looms.make(), await app_looms.make()
    assert first["id"] != second["id"]
    again = [await app_looms.call("POST", "", {"prompt": "a"}, **{"Idempotency-Key": "k1"}) for _ in range(2)]
    assert again[0].json() == again[1].json() and again[0].status_code == 200
    assert len((await app_looms.ok("GET", "", schema="LoomList"))["data"]) == 3


async def test_a_renewed_session_goes_out_with_a_loom_answer_and_a_stream(app_looms: AppLooms) -> None:
    """The routes answer Responses of their own: the renewal's cookie must go out with them."""
    async def renewal_due() -> None:
        async with app_looms.stack.services.ledger.write_sessions() as session:
            await session.exec(update(AppSession).where(col(AppSession.user_id) == app_looms.account.user_id)
                               .values(renewed_at=utcnow() - timedelta(days=2)))
            await session.commit()

    await renewal_due()
    r = await app_looms.call("POST", "", {"prompt": "a"})
    assert r.status_code == 200 and f"Max-Age={30 * 24 * 3600}" in r.headers["set-cookie"]
    assert r.headers["set-cookie"].startswith("acs_session=")
    assert "set-cookie" not in (await app_looms.call("GET", f"/{r.json()['id']}/stream")).headers  # renewed
    await renewal_due()
    streamed = await app_looms.call("GET", f"/{r.json()['id']}/stream")
    assert events_of(streamed.text)[-1] == DONE
    assert streamed.headers["set-cookie"].startswith("acs_session=")


# -- export and import ----------------------------------------------------------------------------------


async def test_the_export_is_the_apis_and_the_apps_import_marks_the_title_imported(app_looms: AppLooms) -> None:
    loom = await app_looms.make("The sky is")
    await app_looms.ok("POST", f"/{loom['id']}", {"title": "Skies"})
    exported = await app_looms.ok("GET", f"/{loom['id']}/export", schema="LoomFile")
    assert exported == (await app_looms.api("GET", f"/{loom['id']}/export")).json()
    imported = await app_looms.ok("POST", "/import", exported)
    assert imported["title"] == "Skies (imported)" and imported["id"] != loom["id"]
    assert [node["text"] for node in imported["nodes"]] == ["The sky is"]
    assert imported["nodes"][0]["id"] != loom["nodes"][0]["id"]
    via_api = await app_looms.api("POST", "/import", exported)
    assert via_api.json()["title"] == "Skies"  # the API keeps the file's title
    # The mark fits in the 120 characters; a file without a title is "Imported loom", which says it.
    long = {**exported, "loom": {**exported["loom"], "title": "x" * 200}}
    assert (await app_looms.ok("POST", "/import", long))["title"] == "x" * 109 + " (imported)"
    untitled = {**exported, "loom": {**exported["loom"], "title": None}}
    assert (await app_looms.ok("POST", "/import", untitled))["title"] == "Imported loom"


# -- a Branch in the App ---------------------------------------------------------------------------------


@pytest.mark.fake(delay_s=0.05)
async def test_a_branch_grows_on_the_runner_with_no_key_and_the_stream_sends_each_change(
        app_looms: AppLooms) -> None:
    loom = await app_looms.make()
    root = loom["nodes"][0]
    nodes = await app_looms.branch(loom, {**BRANCH, "max_tokens": 8, "seed": 7})
    assert [(node["status"], node["parent_id"], node["request"]["seed"]) for node in nodes] == [
        ("queued", root["id"], 7), ("queued", root["id"], 8)]
    app_looms.runner()
    r = await app_looms.call("GET", f"/{loom['id']}/stream")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = events_of(r.text)
    assert events[-1] == DONE
    for event in events[:-1]:
        validate(event, "Node")
    # The root goes out once: after the first read, only Nodes that changed go out again.
    assert [event["id"] for event in events[:-1]].count(root["id"]) == 1
    for node in nodes:
        texts = [event["text"] for event in events[:-1] if event["id"] == node["id"]]
        assert len(set(texts)) > 2 and texts == sorted(texts, key=len)  # it grew, event by event
        (last,) = [event for event in events[:-1] if event["id"] == node["id"]][-1:]
        assert (last["status"], last["text"]) == ("completed", fake_text(8))
    grown = await app_looms.grown(loom["id"])
    assert grown["title"] == "The sky is"  # the first Branch named it
    assert await app_looms.api_read(loom["id"]) == grown
    # A reload catches up: each Node once, then the end.
    assert events_of((await app_looms.call("GET", f"/{loom['id']}/stream")).text) == [*grown["nodes"], DONE]
    # The Nodes ran with no API key; their Holds are of the source `loom`, settled.
    rows = [row for row in await app_looms.rows() if row.kind == WorkKind.node]
    assert sorted((row.key_id, row.status) for row in rows) == [(None, WorkStatus.succeeded)] * 2
    for node in nodes:
        (hold,) = await app_looms.holds(f"node-{uuid.UUID(node['id']).hex}")
        assert (hold.source, hold.key_id, hold.state, hold.used) == (UsageSource.loom, None, HoldState.settled, 12)
    usage = await app_looms.account.ok("GET", "/account/usage")
    (source,) = [line for line in usage["by_source"] if line["source"] == "loom"]
    assert source["completions"] == 2


async def test_the_apps_read_adds_the_last_branchs_settings_as_the_export_keeps_them(app_looms: AppLooms) -> None:
    loom = await app_looms.make()
    read = await app_looms.ok("GET", f"/{loom['id']}", schema=None)
    assert read["last_branch"] == {"model": None, "last_generation_config": None}  # no Branch yet
    first, _ = await app_looms.branch(loom, {**BRANCH, "temperature": 0.5, "stop": ["\n"], "seed": 3})
    app_looms.runner()
    await app_looms.grown(loom["id"])
    # A Branch under a Node of the last one: its settings are the last.
    await app_looms.branch(loom, {"model": "llama-8b", "max_tokens": 3, "n": 3}, node_id=first["id"])
    read = await app_looms.ok("GET", f"/{loom['id']}", schema=None)
    exported = await app_looms.ok("GET", f"/{loom['id']}/export", schema="LoomFile")
    assert read["last_branch"] == {key: exported["loom"][key] for key in ("model", "last_generation_config")}
    config = read["last_branch"]["last_generation_config"]
    assert (read["last_branch"]["model"], config["n"], config["max_tokens"]) == ("llama-8b", 3, 3)
    # The API's read stays the spec's Loom.
    assert "last_branch" not in await app_looms.api_read(loom["id"])


async def test_a_paused_or_revoked_key_of_the_user_does_not_touch_nodes_the_app_started(
        app_looms: AppLooms) -> None:
    loom = await app_looms.make()
    nodes = await app_looms.branch(loom)  # queued before the keys change
    async with app_looms.stack.services.ledger.write_sessions() as session:
        paused, _ = await create_api_key(session, app_looms.account.user_id, "paused")
        await session.commit()
        await set_key_status(session, paused.id, KeyStatus.paused)
        own = (await app_looms.account.ok("GET", "/account/keys"))["data"]
        (laptop,) = [key for key in own if key["name"] == "laptop"]
        await set_key_status(session, uuid.UUID(laptop["id"]), KeyStatus.revoked)
        await session.commit()
    app_looms.runner()
    grown = await app_looms.grown(loom["id"])
    assert [(node["status"], node["text"]) for node in grown["nodes"][1:]] == [("completed", fake_text(2))] * 2
    assert {node["id"] for node in grown["nodes"][1:]} == {node["id"] for node in nodes}
    # And one more Branch, started while no key of the User works.
    await app_looms.branch(grown, {"model": "llama-8b", "max_tokens": 2}, node_id=nodes[0]["id"])
    again = await app_looms.grown(loom["id"])
    assert [node["status"] for node in again["nodes"]] == ["completed"] * 4


@pytest.mark.fake(delay_s=0.1)
async def test_stop_stops_every_growing_node_which_keeps_its_text(app_looms: AppLooms) -> None:
    loom = await app_looms.make()
    nodes = await app_looms.branch(loom, {**BRANCH, "max_tokens": 200})
    app_looms.runner()

    await app_looms.read_when(loom["id"], lambda node: node["status"] == "running" and bool(node["text"]))
    stopped = await app_looms.ok("POST", f"/{loom['id']}/cancel")
    assert [node["status"] for node in stopped["nodes"]] == ["completed", "cancelled", "cancelled"]
    for node in stopped["nodes"][1:]:
        assert node["text"] and fake_text(200).startswith(node["text"]) and node["text"] != fake_text(200)
    assert await app_looms.grown(loom["id"]) == stopped
    assert {node["id"] for node in stopped["nodes"][1:]} == {node["id"] for node in nodes}


async def test_the_tree_edits_in_the_app_change_the_loom_as_the_api_reads_it(app_looms: AppLooms) -> None:
    loom = await app_looms.make("The sky is")
    first, second = await app_looms.branch(loom)
    app_looms.runner()
    await app_looms.grown(loom["id"])
    base = f"/{loom['id']}"
    edited = await app_looms.ok("POST", f"{base}/nodes/{first['id']}", {"text": " blue"})
    (node,) = [node for node in edited["nodes"] if node["id"] == first["id"]]
    assert (node["text"], node["logprobs"]) == (" blue", None)
    split = await app_looms.ok("POST", f"{base}/nodes/{first['id']}/split", {"offset": 2})
    (child,) = [node for node in split["nodes"] if node["parent_id"] == first["id"]]
    assert [n["text"] for n in split["nodes"] if n["id"] in (first["id"], child["id"])] == [" b", "lue"]
    sibling = await app_looms.ok("POST", f"{base}/nodes/{second['id']}/sibling", {"text": " grey"})
    assert [n["text"] for n in sibling["nodes"] if n["parent_id"] == loom["nodes"][0]["id"]] == [
        " b", fake_text(2), " grey"]
    after_delete = await app_looms.ok("DELETE", f"{base}/nodes/{first['id']}")
    assert {n["id"] for n in after_delete["nodes"]}.isdisjoint({first["id"], child["id"]})
    assert after_delete == await app_looms.api_read(loom["id"])
    rooted = await app_looms.ok("POST", f"{base}/root", {"text": "Once"})
    assert [(n["text"], n["parent_id"]) for n in rooted["nodes"]] == [("Once", None)]
    assert rooted == await app_looms.api_read(loom["id"])


# -- a refusal names the Loom page's button where the API names its route -------------------------------

GROWING_LOOM = "A Node of this Loom is queued or running. Stop the Branch with {stop}, or wait until it ends."
NO_BRANCH_YET = ("This Node is queued, so it takes no Branch yet. Branch only under a completed or cancelled "
                 "Node: wait until it ends, or stop it with {stop}.")
STOP_OR_WAIT = "Stop the Branch with {stop}, or wait until it ends."
# Each a request refused while a Branch under the root is queued; `{root}`, `{queued}` the Nodes.
# The message with {stop}, {new_root} and {delete_loom} to fill: the App's buttons, or the API's routes.
REFUSED_WHILE_IT_GROWS = [
    ("DELETE", "", None, GROWING_LOOM),
    ("POST", "/nodes/{queued}/branch", BRANCH, NO_BRANCH_YET),
    ("POST", "/root", {"text": "x"}, GROWING_LOOM),
    ("POST", "/nodes/{root}", {"text": "x"}, "A Node under this Node is queued or running. " + STOP_OR_WAIT),
    ("POST", "/nodes/{root}/split", {"offset": 1}, "A Node under this Node is queued or running. " + STOP_OR_WAIT),
    ("POST", "/nodes/{queued}", {"text": "x"}, "This Node is queued. " + STOP_OR_WAIT),
    ("POST", "/nodes/{queued}/split", {"offset": 0}, "This Node is queued. " + STOP_OR_WAIT),
    ("POST", "/nodes/{queued}/sibling", {"text": "x"},
     "A Node under this Node's parent is queued or running. " + STOP_OR_WAIT),
    ("DELETE", "/nodes/{queued}", None,
     "A Node to delete is queued or running. Delete it when its Branch ends, or stop the Branch with {stop}."),
    ("POST", "/nodes/{root}/sibling", {"text": "x"},
     "A root has no sibling. Write a sibling of a Node under the root, or replace the tree with {new_root}."),
    ("DELETE", "/nodes/{root}", None, "This Node is a root of the Loom. Delete the Loom instead, with {delete_loom}."),
]


async def refused_in_both(app_looms: AppLooms, method: str, path: str, body: Any) -> tuple[str, str]:
    """The App's and the API's message for one request that each refuses with the same status, error
    (but its message) and x-should-retry."""
    in_app, on_v1 = await app_looms.call(method, path, body), await app_looms.api(method, path, body)
    (app_status, app_error), (api_status, api_error) = error_of(in_app), error_of(on_v1)
    assert (app_status, {**app_error, "message": ""}) == (api_status, {**api_error, "message": ""}) == (
        409, {"message": "", "type": "invalid_request_error", "param": None, "code": None})
    assert in_app.headers["x-should-retry"] == on_v1.headers["x-should-retry"] == "false"
    return app_error["message"], api_error["message"]


@pytest.mark.parametrize("method,path,body,message", REFUSED_WHILE_IT_GROWS, ids=lambda value: repr(value)[:40])
async def test_a_refusal_names_the_loom_pages_button_in_the_app_and_the_route_on_v1(
        app_looms: AppLooms, method: str, path: str, body: Any, message: str) -> None:
    loom = await app_looms.make()
    queued, _ = await app_looms.branch(loom)  # no Runner runs them: they stay queued
    before = await app_looms.read(loom["id"])
    path = f"/{loom['id']}" + path.format(root=loom["nodes"][0]["id"], queued=queued["id"])
    assert await refused_in_both(app_looms, method, path, body) == (
        message.format(stop="Stop", new_root="New root", delete_loom="Delete Loom"),
        message.format(stop=f"POST /v1/looms/{loom['id']}/cancel", new_root=f"POST /v1/looms/{loom['id']}/root",
                       delete_loom=f"DELETE /v1/looms/{loom['id']}"))
    assert await app_looms.read(loom["id"]) == before  # nothing changed


async def test_the_ledgers_check_under_the_lock_words_a_branch_refusal_as_the_caller_does(
        app_looms: AppLooms, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Node that the route's first read saw completed, but that grows again once the ledger locks the
    Loom (as a restarted Node does): the ledger's own check refuses, in the caller's words."""
    loom = await app_looms.make()
    queued, _ = await app_looms.branch(loom)
    first_read = looms.read

    async def read_before_it_grew(session: Any, loom_id: uuid.UUID, user_id: uuid.UUID) -> looms.LoomTree:
        tree = await first_read(session, loom_id, user_id)
        tree.node(uuid.UUID(queued["id"])).status = NodeStatus.completed
        return tree

    monkeypatch.setattr(looms, "read", read_before_it_grew)
    branch = f"/{loom['id']}/nodes/{queued['id']}/branch"
    assert await refused_in_both(app_looms, "POST", branch, BRANCH) == (
        NO_BRANCH_YET.format(stop="Stop"), NO_BRANCH_YET.format(stop=f"POST /v1/looms/{loom['id']}/cancel"))
    monkeypatch.undo()
    assert len((await app_looms.read(loom["id"]))["nodes"]) == 3  # the refused Branches made nothing


# -- the App's limit ------------------------------------------------------------------------------------


@pytest.mark.traffic(app_user=BucketPolicy(2, 2 / 60))
async def test_branches_count_against_the_apps_limit_of_each_user_with_playground_runs(
        app_looms: AppLooms) -> None:
    loom = await app_looms.make()
    await app_looms.branch(loom)  # 1
    await app_looms.start(SKY)  # 2: a Playground Run, from the same 600 a minute
    r = await app_looms.call("POST", f"/{loom['id']}/nodes/{loom['nodes'][0]['id']}/branch", BRANCH)
    assert_error(r, 429, "rate_limited", type="rate_limit_error")
    assert r.json()["error"]["message"].startswith(
        "You started more than 2 Runs, Completions, Jobs, and Branches in the App in a minute. Try again in ")
    assert int(r.headers["Retry-After"]) >= 1
    assert len((await app_looms.read(loom["id"]))["nodes"]) == 3  # the refused Branch made nothing
    # What is no new work is not counted; a key's Branch counts against the key's own bucket.
    await app_looms.ok("POST", f"/{loom['id']}", {"title": "x"})
    r = await app_looms.api("POST", f"/{loom['id']}/nodes/{loom['nodes'][0]['id']}/branch", BRANCH)
    assert r.status_code == 200, r.text
    async with app_looms.stack.services.sessions() as session:
        rows = (await session.exec(select(Work).where(Work.kind == WorkKind.node))).all()
    assert sorted(row.key_id is None for row in rows) == [False, False, True, True]
