"""The App's JSON routes under /account, fuzzed with Hypothesis over real HTTP: they have no OpenAPI
document, so ROUTES below is theirs (from api/account/*.py), and a test holds it to the app's routes.

Each case sends one route a body made of its own field names (and sometimes unknown ones) with
arbitrary JSON values: odd unicode, lone surrogates, huge numbers, nested objects, wrong types,
missing fields; or a body that is no object, no JSON, or no UTF-8. Path ids are the App User's own
key ids (and Playground Run and group ids, on the Runs' routes; Looms and their Nodes, on the Looms'),
random UUIDs or any text; the CSRF token is mostly right, sometimes missing or wrong. The
session routes are sent by the App User's browser (signed in once for the whole run), sometimes by a
browser without a session or with an API key. The access routes (apply, invites, sign-in, sign-out,
password links) are sent by a browser without a session, so that no case ends the App User's.

Checks: no 5xx; every error is the spec's error object; a POST without the right CSRF token is 403
csrf_failed; the App User's session never ends; and nothing that a refused request sent is left
behind (no API key, token request, application, session, ...: conftest.LEFTOVER_QUERIES).
"""
from __future__ import annotations

import json
import urllib.parse
import uuid
from dataclasses import dataclass
from datetime import date
from typing import Any, Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from tests.fuzz.conftest import EXAMPLES, SEED, TALLY, LiveServer, check_error_object, check_nothing_left


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # {key_id}, {run_id}, {group_id}, {loom_id}, {node_id} and {token} are path ids
    fields: tuple[str, ...] = ()  # of the JSON body (POST) or of the query (GET)
    session: bool = True  # a signed-in route; False: an access route, sent without a session
    required: tuple[str, ...] = ()  # query fields that every case sends


BRANCH = ("model", "max_tokens", "temperature", "logprobs", "top_p", "top_k", "min_p", "presence_penalty",
          "frequency_penalty", "repetition_penalty", "seed", "stop", "n")  # the spec's BranchRequest
LOOM_FILE = ("version", "node_order", "loom", "nodes")  # the spec's LoomFile
FORM = ("name", "organization", "planned_usage", "agree_to_rules", "how_you_heard", "links", "expected_tokens")
ROUTES = [
    Route("GET", "/account/me"),
    Route("GET", "/account/keys"),
    Route("POST", "/account/keys", ("name",)),
    Route("POST", "/account/keys/{key_id}/rename", ("name",)),
    Route("POST", "/account/keys/{key_id}/pause"),
    Route("POST", "/account/keys/{key_id}/resume"),
    Route("POST", "/account/keys/{key_id}/revoke"),
    Route("GET", "/account/usage", ("range", "from", "to", "key", "model")),
    Route("GET", "/account/notice"),
    Route("GET", "/account/models"),
    Route("GET", "/account/models/{model_id:model_id}/status"),
    Route("GET", "/account/token-requests"),
    Route("POST", "/account/token-requests", ("tokens", "models", "project", "planned_usage",
                                              "how_you_got_the_number", "results", "links", "when_needed")),
    Route("GET", "/account/runs"),
    Route("POST", "/account/runs", ("requests",)),
    Route("GET", "/account/runs/export", ("format", "ids", "every")),
    # Always with ids, never the App User's own: no Runner runs here, so a stream of its queued
    # Runs would follow them for as long as they wait (the page closes it; a fuzz case cannot).
    Route("GET", "/account/runs/stream", ("ids",), required=("ids",)),
    Route("POST", "/account/runs/groups/{group_id}/stop"),
    Route("GET", "/account/runs/{run_id}"),
    Route("GET", "/account/runs/{run_id}/activations"),
    Route("POST", "/account/runs/{run_id}/stop"),
    Route("DELETE", "/account/runs/{run_id}"),
    # In this order: the Looms that POST makes reach the routes after it, the stream's before any
    # Branch grows them, and the deletes last.
    Route("GET", "/account/looms"),
    Route("POST", "/account/looms", ("prompt",)),
    Route("POST", "/account/looms/import", LOOM_FILE),
    Route("GET", "/account/looms/{loom_id}/export"),
    Route("GET", "/account/looms/{loom_id}"),
    Route("POST", "/account/looms/{loom_id}", ("title", "pinned")),
    # Only the App User's Looms in which nothing grows: no Runner runs here, so a stream of a Loom
    # with a queued Node would follow it for as long as it waits.
    Route("GET", "/account/looms/{loom_id}/stream"),
    Route("POST", "/account/looms/{loom_id}/nodes/{node_id}/branch", BRANCH),
    Route("POST", "/account/looms/{loom_id}/cancel"),
    Route("POST", "/account/looms/{loom_id}/nodes/{node_id}", ("text",)),
    Route("POST", "/account/looms/{loom_id}/nodes/{node_id}/split", ("offset", "text")),
    Route("POST", "/account/looms/{loom_id}/nodes/{node_id}/sibling", ("text",)),
    Route("POST", "/account/looms/{loom_id}/root", ("text",)),
    Route("DELETE", "/account/looms/{loom_id}/nodes/{node_id}"),
    Route("DELETE", "/account/looms/{loom_id}"),
    Route("POST", "/account/applications", ("email", *FORM), session=False),
    Route("GET", "/account/invites/{token}", session=False),
    Route("POST", "/account/invites/{token}", FORM, session=False),
    Route("POST", "/account/sign-in", ("email", "password"), session=False),
    Route("POST", "/account/sign-out", session=False),
    Route("POST", "/account/password-links", ("email",), session=False),
    Route("GET", "/account/password-links/{token}", session=False),
    Route("POST", "/account/password", ("token", "password"), session=False),
    Route("POST", "/account/feedback", ("kind", "note", "page", "anonymous", "errors", "screenshots")),
    # Sign-in providers: the fuzz's App offers none, so each provider's routes answer 404.
    Route("GET", "/account/providers", session=False),
    Route("GET", "/account/providers/{provider_id}/start", ("intent", "next"), session=False),
    Route("GET", "/account/providers/{provider_id}/callback", ("code", "state"), session=False),
    Route("POST", "/account/providers/{provider_id}/unlink"),
]
NOT_JSON_ROUTES = {("GET", "/account/csrf")}  # 204 with a cookie, nothing to send


# Strategies ----------------------------------------------------------------------------------------
# Any character, lone surrogates and controls included.
ODD_TEXT = st.text(st.characters(exclude_categories=()), max_size=40)
HUGE = st.integers(min_value=-(2**80), max_value=2**80) | st.sampled_from([2**63, -(2**63) - 1, 10**400])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | HUGE | st.floats() | ODD_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ODD_TEXT, inner, max_size=4),
    max_leaves=12,
)
WORDS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30)
# Around the columns' sizes (200, 320, 10,000 characters): a text past a column must be refused, not a 500.
LONG = st.builds(lambda piece, size: (piece * size)[:size], st.text(min_size=1, max_size=3),
                 st.sampled_from([120, 200, 201, 320, 321, 10_000, 10_001]))
PLAUSIBLE = {
    **{name: WORDS | LONG for name in ("name", "organization", "project", "planned_usage", "how_you_heard", "links",
                                       "results", "when_needed", "how_you_got_the_number")},
    "expected_tokens": st.sampled_from(["50K", "2.5M", "1000"]),
    "email": st.emails().map(str) | LONG.map(lambda t: f"{t}@example.org"), "password": WORDS | LONG, "token": WORDS,
    "agree_to_rules": st.booleans(),
    "tokens": st.integers(1, 10**8) | st.sampled_from(["50K", "2.5M", "1,000", "0", "-1", "1e9", "", 0, -5]),
    "models": st.lists(st.sampled_from(["tiny-llama", "llama-8b", "no-such-model"]), min_size=1, max_size=3),
    "range": st.sampled_from(["today", "last_7_days", "last_30_days", "this_month", "last_month"]),
    "from": st.dates(date(1, 1, 1), date(9999, 12, 31)).map(date.isoformat),
    "to": st.dates(date(1, 1, 1), date(9999, 12, 31)).map(date.isoformat),
    "key": st.uuids().map(str), "model": st.sampled_from(["tiny-llama", "llama-8b", "nope"]),
    # A Playground start: bodies of POST /v1/completions, some of them to be refused.
    "requests": st.lists(st.fixed_dictionaries(
        {"model": st.sampled_from(["tiny-llama", "llama-8b", "nope"]), "prompt": WORDS | LONG,
         "max_tokens": st.integers(-1, 40)},
        optional={"n": st.integers(0, 3), "logprobs": st.integers(-1, 6), "temperature": st.floats() | JSON_VALUES,
                  "stream": st.booleans(), "echo": st.booleans(), "seed": HUGE, "stop": JSON_VALUES}),
        max_size=7),
    "format": st.sampled_from(["json", "jsonl", "text", "csv", ""]),
    "every": st.sampled_from(["true", "false", "yes", ""]),
    "ids": st.lists(st.uuids().map(str), min_size=1, max_size=3).map(",".join) | WORDS,
    # The Loom routes: a prompt, a title, a Node's text, a split, a Branch, a Loom file.
    **{name: WORDS | LONG for name in ("prompt", "title", "text")},
    "pinned": st.booleans(), "offset": st.integers(-1, 40), "max_tokens": st.none() | st.integers(1, 40) | st.integers(-1, 0),
    "n": st.integers(1, 8) | st.integers(0, 9), "logprobs": st.none() | st.integers(-1, 21),
    "seed": st.none() | st.integers(0, 2**32) | HUGE,
    # Mostly a value that a Branch takes, so that some Branches are made.
    **{name: st.none() | st.sampled_from([0.5, 1]) | st.floats(-1, 3, exclude_min=True)
       for name in ("temperature", "top_p", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty")},
    "top_k": st.none() | st.integers(-2, 50), "stop": st.none() | WORDS | st.lists(WORDS, max_size=5),
    "version": st.sampled_from([2, 1, "2"]), "node_order": st.sampled_from(["parents_first", "any"]),
    "loom": st.fixed_dictionaries({}, optional={"title": WORDS | LONG | st.none(),
                                                "model": st.sampled_from(["tiny-llama", "nope"]),
                                                "last_generation_config": JSON_VALUES}),
    "nodes": st.lists(st.fixed_dictionaries(
        {"id": st.sampled_from(["a", "b", "c"]) | WORDS, "parent_id": st.none() | st.sampled_from(["a", "b", "c"]),
         "text": WORDS | LONG, "status": st.sampled_from(["completed", "cancelled", "failed", "running"])},
        optional={"position": st.integers(-1, 3), "logprobs": JSON_VALUES, "error": JSON_VALUES,
                  "generation_config": JSON_VALUES, "model": WORDS, "seed": HUGE}),
        max_size=4),
}


@dataclass
class Attempt:
    """One fuzz request, as Hypothesis prints it for a failing case."""

    method: str
    path: str
    query: dict[str, str]
    body: bytes | None
    csrf: str  # "right", "missing" or "wrong"
    who: str  # "browser" (the route's own), "no session", or "api key"


def path_ids(own_ids: list[str]) -> st.SearchStrategy[str]:
    # One of the User's own ids by a number, not sampled_from: the Runs and Looms come and go between
    # cases, and a draw must ask the same of Hypothesis each time (its replay checks it), with no
    # own id too.
    own = st.integers(0, 2**20).map(
        lambda number: own_ids[number % len(own_ids)] if own_ids else str(uuid.UUID(int=number)))
    return (own | st.uuids().map(str) | st.text(max_size=40)
            ).map(lambda value: urllib.parse.quote(value, safe="") or "%20")


@st.composite
def bodies(draw: Any, fields: tuple[str, ...]) -> bytes | None:
    shape = draw(st.integers(0, 19))
    if shape == 0:
        return None
    if shape == 1:
        return draw(st.binary(max_size=40))  # not JSON, maybe not UTF-8
    if shape == 2:
        return json.dumps(draw(JSON_VALUES)).encode()  # JSON, maybe not an object
    if shape == 3:  # an integer around the 4300 digits that Python reads (json.dumps cannot write more)
        return b'{"%s": %s}' % (draw(st.sampled_from(fields or ("x",))).encode(), b"7" * draw(st.integers(4290, 4310)))
    if shape < 10:  # every field, of a plausible value, then maybe one left out or of any value
        body = {name: draw(PLAUSIBLE.get(name, JSON_VALUES)) for name in fields}
        if fields and draw(st.booleans()):
            name = draw(st.sampled_from(fields))
            body[name] = draw(JSON_VALUES)
            if draw(st.booleans()):
                del body[name]
    else:  # some of the fields, of any values
        chosen = draw(st.lists(st.sampled_from(fields), unique=True)) if fields else []
        body = {name: draw(PLAUSIBLE.get(name, JSON_VALUES) | JSON_VALUES) for name in chosen}
    if draw(st.integers(0, 5)) == 0:
        body.update(draw(st.dictionaries(ODD_TEXT, JSON_VALUES, min_size=1, max_size=2)))
    if draw(st.booleans()):
        return json.dumps(body).encode()  # \u escapes: lone surrogates arrive as escapes
    return json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")  # raw, maybe bad UTF-8


@st.composite
def attempts(draw: Any, route: Route, own_ids: list[str], looms: dict[str, list[str]]) -> Attempt:
    """`looms`: the App User's Looms, each with its Nodes."""
    path = route.path
    for name in ("{key_id}", "{run_id}", "{group_id}", "{token}", "{provider_id}"):
        if name in path:
            path = path.replace(name, draw(path_ids(own_ids)))
    if "{loom_id}" in path:  # one of the User's Looms, then a Node of it
        loom_id = draw(path_ids(sorted(looms)))
        path = path.replace("{loom_id}", loom_id).replace("{node_id}", draw(path_ids(looms.get(loom_id, []))))
    if "{model_id:model_id}" in path:  # a served model's id, alias or name, or any text
        model = draw(st.sampled_from(["tiny-llama", "llama-8b", "nope"]) | st.text(max_size=40))
        path = path.replace("{model_id:model_id}", urllib.parse.quote(model, safe="/") or "%20")
    query, body = {}, None
    if route.method == "GET":
        names = draw(st.lists(st.sampled_from(route.fields), unique=True)) if route.fields else []
        names += [name for name in route.required if name not in names]
        query = {name: draw(PLAUSIBLE.get(name, WORDS) | WORDS) for name in names}
        if draw(st.integers(0, 5)) == 0:
            query[draw(WORDS)] = draw(WORDS)
    else:
        body = draw(bodies(route.fields))
    csrf = draw(st.sampled_from(["right"] * 8 + ["missing", "wrong"]))
    who = "browser" if not route.session else draw(st.sampled_from(["browser"] * 8 + ["no session", "api key"]))
    return Attempt(route.method, path, query, body, csrf, who)


# The test ------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def stranger(fuzz_server: LiveServer) -> Iterator[httpx.Client]:
    """A browser with the App's CSRF cookie and no session."""
    with httpx.Client(base_url=fuzz_server.url, timeout=60) as browser:
        assert browser.get("/account/csrf").status_code == 204
        yield browser


def test_the_table_has_every_account_route(fuzz_server: LiveServer) -> None:
    served = {(method, route.path) for route in fuzz_server.stack.app.routes
              if getattr(route, "path", "").startswith("/account/") for method in route.methods}
    assert served - NOT_JSON_ROUTES == {(route.method, route.path) for route in ROUTES}


@pytest.mark.parametrize("route", ROUTES, ids=lambda route: f"{route.method} {route.path}")
@settings(max_examples=EXAMPLES, deadline=None, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@seed(SEED)
@given(data=st.data())
def test_account_routes(route: Route, data: st.DataObject, fuzz_server: LiveServer, app_browser: httpx.Client,
                        stranger: httpx.Client) -> None:
    own_ids = fuzz_server.app.key_ids + (fuzz_server.run_ids() if "/runs/" in route.path else [])
    looms = fuzz_server.app_looms(growing=not route.path.endswith("/stream")) if "{loom_id}" in route.path else {}
    attempt = data.draw(attempts(route, own_ids, looms), label="request")
    browser = app_browser if route.session and attempt.who != "no session" else stranger
    before = fuzz_server.leftovers()
    answer = send(browser, attempt, fuzz_server)
    TALLY.count(f"account {route.method} {route.path}", answer)
    assert answer.status_code < 500, answer.text
    if answer.status_code >= 400:
        check_error_object(answer)
    if 400 <= answer.status_code < 500:
        check_nothing_left(before, fuzz_server.leftovers())
    no_route = answer.status_code == 404 and answer.json()["error"]["code"] is None  # a path id with %2F
    if route.method == "POST" and attempt.csrf != "right" and not no_route:
        assert (answer.status_code, answer.json()["error"]["code"]) == (403, "csrf_failed"), answer.text
    if browser is app_browser and attempt.who == "browser":
        assert "session_ended" not in answer.text, "a fuzz case ended the App User's session"


def send(browser: httpx.Client, attempt: Attempt, server: LiveServer) -> httpx.Response:
    headers = {"Content-Type": "application/json"} if attempt.body is not None else {}
    if attempt.csrf != "missing":
        token = browser.cookies.get("acs_csrf") or ""
        headers["X-CSRF-Token"] = token if attempt.csrf == "right" else uuid.uuid4().hex
    if attempt.who == "api key":
        headers.update(server.api_headers())
    return browser.request(attempt.method, attempt.path, params=attempt.query, content=attempt.body,
                           headers=headers)
