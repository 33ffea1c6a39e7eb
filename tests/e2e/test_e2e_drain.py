"""Drain on a planned restart, end to end (spec: "When the API restarts"): the Serve application of
the test profile (ingress, the tiny model's real engine, the Runner in a replica of its own) on the
session's Ray and PostgreSQL, read through the routes that a user reads, then the Holds.

Two planned restarts of the Runner, each with a grace of GRACE_S (ACS_RUNNER_GRACE_S in its replica):
- `serve.run` of a new version of the application (its Runner's environment changed), as `serve deploy`
  of a new version does: Serve replaces each replica, the Runner's through its graceful shutdown
  (`RunnerServer.__del__`);
- a SIGTERM to the Runner's process (deployments/runner_server.py, `drain_on_sigterm`).

Work that does not end within the grace (here: all of it, long work and a short grace, so that no
timing is bet on) goes back to `queued` with its Hold released, then runs again from the beginning in
the new replica, and is charged once. A Playground Run too: only a crash fails it
(test_e2e_playground.py). The spend stop is locked across each restart, so the cut work waits in
`queued` where the test reads it ("While new GPU work is paused, the work that went back to `queued`
waits, and runs when the pause ends"); its Clear lets it run.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import uuid
from typing import Any, Callable, Iterator

import httpx
import pytest

from ledger.tokens.spend import set_spend_stop
from tests.e2e.test_e2e_jobs import submit, wait, work_row
from tests.e2e.test_e2e_looms import branch, make_loom
from tests.e2e.test_e2e_looms import read as read_loom
from tests.e2e.test_e2e_playground import app, ok, read, run_holds, run_rows, text_of, usage  # noqa: F401 - app: the fixture
from tests.serve_fixtures import PORT, ServeInstance, holds, runner_process, with_runner_env

APP = "drain"
# Short: the cut comes soon after the stop begins (Serve first waits 2 s for the replica's calls). That
# work which ends within the grace ends as it would is no timing bet here: the unit tests stop a Runner
# on the fake engine at a chosen moment (tests/unit/test_jobs.py::
# test_a_planned_stop_queues_running_work_again_and_it_is_charged_once, tests/unit/test_runner_stop.py,
# test_loom_nodes.py::test_a_planned_stop_puts_a_node_back_and_it_runs_again_from_the_beginning_charged_once,
# test_playground_runs.py::test_a_planned_restart_runs_a_run_again_from_the_beginning).
GRACE_S = 1.0
# The most that the model's context (2,048 tokens) holds after "The sky is" with its BOS: far past the
# grace on any machine this runs on (alone on the model, 2,000 tokens took 8 s and more here).
LONG = {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2044, "temperature": 0}
# A Node writes at most 1,000 tokens: after a prompt of about 900, where each token costs more.
NODE_PROMPT = "The sky is blue. " * 180
NODE_TOKENS = 1000


def deploy(version: str) -> None:
    """The application, its Runner's version named in the Runner's environment: a new `version` is a
    new version of the Runner, which Serve replaces, and of nothing else (one code version for all, as
    `serve deploy` gives them). Were the model's engine replaced too, its load (17 s in CI) would come
    before the old Runner's stop, and a Node (1,000 tokens at most) could end before its cut."""
    from ray import serve

    from cluster.serve_app import build_application

    env = {"ACS_RUNNER_GRACE_S": str(GRACE_S), "ACS_TEST_DEPLOYED_VERSION": version}
    serve.run(with_runner_env(build_application("test"), env, code_version=APP), name=APP, route_prefix=f"/{APP}")


@pytest.fixture(scope="module")
def stack(serve_instance: ServeInstance) -> Iterator[tuple[str, str]]:
    from ray import serve

    deploy("1")
    try:
        yield f"{serve_instance.root}/{APP}/v1", serve_instance.new_key("drain")
    finally:
        serve.delete(APP)


@pytest.fixture(scope="module")
def root(stack: tuple[str, str]) -> str:
    """The App's root, for test_e2e_playground's `app` (a signed-in User)."""
    return f"http://127.0.0.1:{PORT}/{APP}"


@contextlib.contextmanager
def spend_stopped(serve_instance: ServeInstance) -> Iterator[None]:
    """New GPU work paused (an admin's Lock) until the block ends: the Runner claims nothing."""
    async def change(session: Any, locked: bool) -> None:
        await set_spend_stop(session, locked, "a planned restart, in a test", "test_e2e_drain")

    serve_instance.read_ledger(lambda session: change(session, True))
    try:
        yield
    finally:
        serve_instance.read_ledger(lambda session: change(session, False))


def until(found: Callable[[], Any], what: str, timeout_s: float = 120) -> Any:
    """found()'s first truthy answer. A read that fails counts as none yet: while a new version is
    deployed, Serve replaces the ingress too, and a read may meet the old one as it stops."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            answer, failure = found(), None
        except (AssertionError, httpx.HTTPError, KeyError, ValueError) as error:
            answer, failure = None, error
        if answer:
            return answer
        assert time.monotonic() < deadline, f"{what}: {failure!r}"
        time.sleep(0.1)


def until_status(read_it: Callable[[], dict], status: str, what: str, timeout_s: float = 120) -> dict:
    """read_it()'s first answer in `status`; a timeout names the status last read (work that ended
    before its cut reads `completed`)."""
    seen: list[Any] = [None]

    def found() -> dict | None:
        answer = read_it()
        seen[0] = answer.get("status")
        return answer if seen[0] == status else None
    try:
        return until(found, what, timeout_s)
    except AssertionError as error:
        raise AssertionError(f"{error} (last read: {seen[0]!r})") from None


def alive(pid: int) -> bool:
    """The process runs (a zombie that its parent has not reaped yet has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def spent(hold_list: list[Any]) -> list[tuple[str, int]]:
    return sorted((hold.state.value, hold.used) for hold in hold_list)


def job(stack: tuple[str, str], job_id: str) -> dict:
    base, key = stack
    return httpx.get(f"{base}/completion-jobs/{job_id}", headers={"Authorization": f"Bearer {key}"},
                     timeout=30).json()


def node(stack: tuple[str, str], loom_id: str, node_id: str) -> dict:
    return next(found for found in read_loom(stack, loom_id)["nodes"] if found["id"] == node_id)


def node_holds(serve_instance: ServeInstance, node_id: str) -> list[Any]:
    return holds(serve_instance, f"node-{uuid.UUID(node_id).hex}")


def held(hold_list: list[Any]) -> bool:
    return [hold.state.value for hold in hold_list] == ["held"]


def test_a_new_version_drains_the_runner_and_the_cut_work_runs_again_in_the_new_replica_charged_once(
        stack: tuple[str, str], app: httpx.Client, serve_instance: ServeInstance) -> None:
    old = runner_process(APP)
    before = usage(app)
    # Long work of each kind: a Job, a Node and a Run.
    long_job = submit(stack, LONG)
    loom = make_loom(stack, NODE_PROMPT)
    (long_node,) = branch(stack, loom["id"], loom["nodes"][0]["id"], max_tokens=NODE_TOKENS, temperature=0)
    (run,) = ok(app.post("/account/runs", json={"requests": [LONG]}), 201)["runs"]
    until(lambda: held(holds(serve_instance, long_job["request_id"])), "the long Job runs")
    until(lambda: held(node_holds(serve_instance, long_node["id"])), "the Node runs")
    kept = until(lambda: (found := read(app, run["id"]))["status"] == "running" and text_of(found) and found,
                 "the Run writes")
    node_text = until(lambda: node(stack, loom["id"], long_node["id"])["text"], "the Node writes")

    with spend_stopped(serve_instance):
        redeploy = threading.Thread(target=deploy, args=("2",))
        deployed = time.monotonic()
        redeploy.start()
        # The old Runner gives them the grace, then cuts them.
        until(lambda: job(stack, long_job["id"])["status"] == "queued", "the long Job is queued again", GRACE_S + 60)
        print(f"the long Job was queued again {time.monotonic() - deployed:.1f} s after serve.run")
        # As the user reads them: queued again, and the Node and the Run start from nothing.
        cut_node = until_status(lambda: node(stack, loom["id"], long_node["id"]), "queued", "the Node is queued again")
        assert (cut_node["text"], cut_node["error"]) == ("", None), cut_node
        cut_run = until_status(lambda: read(app, run["id"]), "queued", "the Run is queued again")
        assert (cut_run["choices"], cut_run["used_tokens"], cut_run["error"]) == ([], 0, None), cut_run
        # Their Holds were released by the old Runner: the cut requests cost nothing.
        cut = [holds(serve_instance, long_job["request_id"]), node_holds(serve_instance, long_node["id"]),
               run_holds(serve_instance, run["id"])]
        for (hold,) in cut:
            assert (hold.state.value, hold.used, hold.owner) == ("released", 0, old["owner"])

        redeploy.join(300)
        print(f"the new version ran {time.monotonic() - deployed:.1f} s after serve.run")
        assert not redeploy.is_alive()
        until(lambda: not alive(old["pid"]), "the old Runner's process exits", 30)
        new = runner_process(APP)
        assert new["owner"] != old["owner"]
        assert usage(app)["allowance"]["used"] == before["allowance"]["used"]  # the Run's Hold counts no more
        # While new GPU work is paused, the new Runner leaves them queued.
        time.sleep(2)
        assert job(stack, long_job["id"])["status"] == "queued"
        assert read(app, run["id"])["status"] == "queued"

    # Once the pause ends they run again, in the new replica, from the beginning, each charged once: to
    # the whole request that its Hold held.
    done_job = wait(stack, long_job["id"], "succeeded", timeout_s=300)
    assert done_job["usage_pending"] is False
    done_node = until(lambda: (found := node(stack, loom["id"], long_node["id"]))["status"] == "completed" and found,
                      "the Node ends", 300)
    assert done_node["text"].startswith(node_text)  # temperature 0: the same tokens, from the beginning
    done_run = until(lambda: (found := read(app, run["id"]))["status"] == "completed" and found, "the Run ends", 300)
    assert text_of(done_run).startswith(text_of(kept))
    for (cut_hold,), again in zip(cut, (holds(serve_instance, long_job["request_id"]),
                                        node_holds(serve_instance, long_node["id"]), run_holds(serve_instance, run["id"]))):
        assert spent(again) == [("released", 0), ("settled", cut_hold.tokens)]
        assert next(hold.owner for hold in again if hold.state.value == "settled") == new["owner"]
    assert work_row(serve_instance, long_job["id"]).attempts == 2
    row, work = run_rows(serve_instance, run["id"])
    assert (work.attempts, row.attempt) == (2, 2)
    whole = cut[2][0].tokens
    assert done_run["used_tokens"] == whole
    assert usage(app)["allowance"]["used"] == before["allowance"]["used"] + whole  # the Run, once


def test_a_sigterm_to_the_runner_drains_it_and_the_cut_run_runs_again(
        stack: tuple[str, str], app: httpx.Client, serve_instance: ServeInstance) -> None:
    old = runner_process(APP)
    before = usage(app)
    (run,) = ok(app.post("/account/runs", json={"requests": [LONG]}), 201)["runs"]
    kept = until(lambda: (found := read(app, run["id"]))["status"] == "running" and text_of(found) and found,
                 "the Run writes")
    until(lambda: held(run_holds(serve_instance, run["id"])), "the Run holds its tokens")

    with spend_stopped(serve_instance):
        signalled = time.monotonic()
        os.kill(old["pid"], signal.SIGTERM)
        # A crash would fail the Run, and without the drain it ran on to its end: the planned stop
        # gives it its grace, then queues it again, and it costs nothing.
        cut_run = until(lambda: (found := read(app, run["id"]))["status"] != "running" and found,
                        "the Run is cut", GRACE_S + 30)
        cut_s = time.monotonic() - signalled
        assert (cut_run["status"], cut_run["choices"], cut_run["used_tokens"]) == ("queued", [], 0), cut_run
        assert GRACE_S < cut_s < GRACE_S + 15, cut_s  # the grace begins after os.kill
        (hold,) = run_holds(serve_instance, run["id"])
        assert (hold.state.value, hold.used, hold.owner) == ("released", 0, old["owner"])
        # Ray's exit then waits for the replica's calls in flight (Serve's long polls, about 30 s).
        until(lambda: not alive(old["pid"]), "the Runner's process exits", 90)
        print(f"SIGTERM to the Run queued again: {cut_s:.1f} s, to the process's exit: "
              f"{time.monotonic() - signalled:.1f} s (grace {GRACE_S} s)")
        new = until(lambda: (found := _runner_or_none())["pid"] not in (0, old["pid"]) and found,
                    "Serve starts another Runner", 120)
        time.sleep(2)
        assert read(app, run["id"])["status"] == "queued"

    done = until(lambda: (found := read(app, run["id"]))["status"] == "completed" and found, "the Run ends", 300)
    whole = hold.tokens
    assert text_of(done).startswith(text_of(kept)) and done["used_tokens"] == whole
    again = run_holds(serve_instance, run["id"])
    assert spent(again) == [("released", 0), ("settled", whole)]
    assert next(hold.owner for hold in again if hold.state.value == "settled") == new["owner"]
    assert usage(app)["allowance"]["used"] == before["allowance"]["used"] + whole


def _runner_or_none() -> dict:
    """The Runner's replica, or a pid of 0 while Serve has none that answers."""
    try:
        return runner_process(APP)
    except Exception:  # noqa: BLE001 - the dead replica answers errors until it is replaced
        return {"pid": 0, "owner": ""}
