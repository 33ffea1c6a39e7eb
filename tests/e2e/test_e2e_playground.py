"""Playground Runs end to end: the Serve application of the test profile (ingress, the tiny
model's real engine, the Runner in a replica process of its own), PostgreSQL, and a User
signed in to the App over HTTP with its session and CSRF token, as the App's page is.

The Runner is killed with SIGKILL while a Run runs. Unlike a Job or a Node, which run again,
the Run fails once the lease finds the Runner gone, keeps the text that it had and costs
nothing (spec: "When the API restarts"): what the App's routes show is checked, then the Hold
in the ledger. The lease is short here (ACS_RUNNER_LEASE_S, conftest.py's serve_instance).
"""
from __future__ import annotations

import json
import os
import threading
import time
import uuid
from typing import Any, Iterator

import httpx
import pytest

from domain.playground.handler import FAILED
from ledger.store.coltypes import utcnow
from ledger.work.tables import PlaygroundRun, Work
from tests.account_fixtures import PASSWORD, new_user
from tests.serve_fixtures import ServeInstance, holds, kill_runner

APP = "playground"
# Long enough that the kill lands mid-Run, also on a fast machine: the tiny model on a CPU
# writes its 1,500 tokens in many seconds, and the kill comes after about 20 of them.
LONG = {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 1500, "temperature": 0}
GROWN = 100  # characters of text before the kill


@pytest.fixture(scope="module")
def root(serve_instance: ServeInstance) -> Iterator[str]:
    with serve_instance.application("test", APP, f"/{APP}") as base:
        yield base.removesuffix("/v1")


@pytest.fixture
def app(serve_instance: ServeInstance, root: str) -> Iterator[httpx.Client]:
    """A new User with a password, signed in through POST /account/sign-in: a client that sends
    its session cookie and the CSRF token, as the App's page does. No API key: a Run needs none."""
    user = new_user(utcnow())
    email = user.email

    async def add(session: Any) -> None:
        session.add(user)
        await session.commit()

    serve_instance.read_ledger(add)
    serve_instance.clear_sign_in_tries()
    with httpx.Client(base_url=root, timeout=60) as http:
        assert http.get("/account/csrf").status_code == 204
        http.headers["X-CSRF-Token"] = http.cookies["acs_csrf"]
        answer = http.post("/account/sign-in", json={"email": email, "password": PASSWORD})
        assert answer.status_code == 200, answer.text
        http.headers["X-CSRF-Token"] = http.cookies["acs_csrf"]  # a sign-in sets a new one
        yield http


def ok(answer: httpx.Response, status: int = 200) -> Any:
    assert answer.status_code == status, answer.text
    return answer.json()


def read(app: httpx.Client, run_id: str) -> dict:
    return ok(app.get(f"/account/runs/{run_id}"))


def text_of(run: dict) -> str:
    return run["choices"][0]["text"] if run["choices"] else ""


def usage(app: httpx.Client) -> dict:
    """The User's Usage page (this month), without the time it was read; its days as their sum,
    so that a test across midnight (UTC) compares the same."""
    page = ok(app.get("/account/usage"))
    for moving in ("updated_at", "to"):
        del page[moving]
    page["days"] = sum(day["input"] + day["output"] for day in page.pop("days"))
    return page


def wait_for(app: httpx.Client, run_id: str, done: Any, timeout_s: float = 300) -> dict:
    """The Run once `done(run)` holds."""
    deadline = time.monotonic() + timeout_s
    while not done(run := read(app, run_id)):
        assert time.monotonic() < deadline, run
        time.sleep(0.1)
    return run


def run_rows(serve_instance: ServeInstance, run_id: str) -> tuple[Any, Any]:
    """The Run's row and its work row, as the ledger has them."""
    async def query(session: Any) -> tuple[Any, Any]:
        run = await session.get(PlaygroundRun, uuid.UUID(run_id))
        return run, await session.get(Work, run.work_id)
    return serve_instance.read_ledger(query)


def run_holds(serve_instance: ServeInstance, run_id: str) -> list[Any]:
    """The Holds of the Run's attempts (their request ids start with the Run's)."""
    return holds(serve_instance, f"run-{uuid.UUID(run_id).hex}")


class Follower(threading.Thread):
    """GET /account/runs/stream?ids=<the Run>, open across the kill: each Run event, in order."""

    def __init__(self, app: httpx.Client, run_id: str) -> None:
        super().__init__()
        self.base_url, self.cookies, self.run_id = app.base_url, app.cookies, run_id
        self.events: list[Any] = []
        self.grown = threading.Event()

    def run(self) -> None:
        # A client of its own, with the session's cookies: the test reads the Run beside it.
        with httpx.Client(base_url=self.base_url, cookies=self.cookies, timeout=300) as http, \
                http.stream("GET", f"/account/runs/stream?ids={self.run_id}") as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if line.startswith("data: "):
                    data = line[len("data: "):]
                    self.events.append(data if data == "[DONE]" else json.loads(data))
                    if data != "[DONE]" and len(text_of(self.events[-1])) >= GROWN:
                        self.grown.set()


def test_a_run_whose_runner_is_killed_fails_keeps_its_text_and_costs_nothing(
        app: httpx.Client, serve_instance: ServeInstance) -> None:
    before = usage(app)
    started = ok(app.post("/account/runs", json={"requests": [LONG]}), 201)
    assert started["refused"] == []
    (run,) = started["runs"]
    follower = Follower(app, run["id"])
    follower.start()
    assert follower.grown.wait(120)
    # The ledger has some of its text too (it writes every 100 ms), and the Run holds its tokens.
    kept = wait_for(app, run["id"], lambda found: len(text_of(found)) >= GROWN, timeout_s=60)
    assert kept["status"] == "running", kept
    running = usage(app)
    assert running["completions"]["running"] == 1
    assert running["allowance"]["used"] > before["allowance"]["used"]  # the Hold counts while it runs
    (hold,) = run_holds(serve_instance, run["id"])
    assert hold.state.value == "held"

    kill_runner(APP)
    failed = wait_for(app, run["id"], lambda found: found["status"] != "running")
    follower.join(300)
    assert not follower.is_alive()

    # It failed, with the spec's 500 internal_error, and kept the text that it had before the kill.
    assert failed["status"] == "failed", failed
    assert failed["error"] == {"message": FAILED, "type": "internal_error", "param": None, "code": "internal_error"}
    assert failed["finished_at"] is not None
    text = text_of(failed)
    assert text.startswith(text_of(kept)) and len(text) >= GROWN
    # The stream showed one text growing, and its last Run is the failed one, as a read shows it.
    events = follower.events
    assert events[-1] == "[DONE]" and events[-2] == failed, events[-2:]
    texts = [text_of(event) for event in events[:-1]]
    longest = max(texts, key=len)
    assert all(longest.startswith(seen) for seen in texts), texts
    assert next(r for r in ok(app.get("/account/runs"))["data"] if r["id"] == run["id"])["status"] == "failed"

    # It costs nothing: the Usage page is as it was before the Run, and its Hold was released whole.
    assert usage(app) == before
    spent = [(h.state.value, h.used) for h in run_holds(serve_instance, run["id"])]
    assert spent == [("released", 0)]
    row, work = run_rows(serve_instance, run["id"])
    assert (work.status.value, work.attempts, row.attempt) == ("failed", 1, 1)

    # It does not run again: after another lease it is as it was.
    time.sleep(float(os.environ.get("ACS_RUNNER_LEASE_S", "4")) + 1)
    assert read(app, run["id"]) == failed
    assert [h.state.value for h in run_holds(serve_instance, run["id"])] == ["released"]
