"""The cluster rehearsal end to end (`bash cluster/rehearse.sh`): three Ray nodes on this machine, the
GPU cluster's Serve config with CPU models, PostgreSQL and Redis. Driven as users drive a cluster: the
`openai` SDK, a harvest, a Job, a Loom Branch and a Playground Run.

It checks what the cluster's shape promises: the ingress and the Runner stay on the head, each model on
the `models` node and the harvest host on the `harvest` node; the two ingress replicas answer alike (a
request's replica is read from Serve's log of the X-Request-Id that the test sent, and /metrics names
its replica), since the rate buckets, the per-key lines and the counts of /metrics live in Redis; a
harvest's signed links work at either replica; a model scales to zero and comes back through its boot
stages. The tests run in this order, so that the model's idle time passes during the harvest.
"""
from __future__ import annotations

import os
import re
import signal
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator

import httpx
import openai
import pytest
from safetensors.torch import load as load_safetensors

from cluster.rehearsal import ingress_replica_of, processes, serve_status
from harvest.links import ALTERED
from ledger.store.coltypes import utcnow
from tests.account_fixtures import PASSWORD, new_user
from tests.cluster.conftest import Rehearsal, dump

# A start's stages in their order (spec: "Check whether a model is Warm").
STAGES = ["waiting_for_gpu", "container_started", "weights_loading", "weights_loaded"]
RATE = 600  # "Other requests to /v1, for each API key": 600 a minute, one back every 0.1 s
LINE_RUNNING = 16  # max_inflight_per_key: the 17th Completion of one key waits in its line
SAMPLE = re.compile(r'^(\w+)\{([^}]*)\} (\S+)$')


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def kinds(rehearsal: Rehearsal) -> dict[str, list[dict]]:
    return processes(rehearsal.layout)


def nodes_of(found: dict[str, list[dict]], kind: str) -> list[str]:
    return sorted(item["node"] for item in found.get(kind, []))


def get(rehearsal: Rehearsal, path: str, key: str, request_id: str | None = None, **kwargs: Any) -> httpx.Response:
    headers = {**auth(key), **({"X-Request-Id": request_id} if request_id else {})}
    return httpx.get(f"{rehearsal.layout.root}{path}", headers=headers, timeout=60, **kwargs)


def scrape(rehearsal: Rehearsal) -> tuple[str, dict[tuple[str, str], float]]:
    """One GET /metrics: the replica that answered, and its samples by (name, labels)."""
    answer = get(rehearsal, "/metrics", rehearsal.metrics_token)
    assert answer.status_code == 200, answer.text
    samples: dict[tuple[str, str], float] = {}
    for line in answer.text.splitlines():
        found = SAMPLE.match(line)
        if found:
            samples[(found[1], found[2])] = float(found[3])
    (replica,) = {re.search(r'replica="([^"]+)"', labels)[1]  # type: ignore[index]
                  for (name, labels) in samples if name == "acs_line_requests"}
    return replica, samples


def scrape_each_replica(rehearsal: Rehearsal, tries: int = 60) -> dict[str, dict[tuple[str, str], float]]:
    """A scrape answered by each of the two ingress replicas (Serve's proxy picks one for each request)."""
    seen: dict[str, dict[tuple[str, str], float]] = {}
    for _ in range(tries):
        replica, samples = scrape(rehearsal)
        seen[replica] = samples
        if len(seen) == 2:
            return seen
    raise AssertionError(f"{tries} scrapes reached only {sorted(seen)}")


def wait_for(check: Any, timeout_s: float, what: str, every_s: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s"
        time.sleep(every_s)
    return found


# -- the cluster's shape ------------------------------------------------------------------------

def test_the_rehearsal_lays_the_deployments_out_on_their_nodes(rehearsal: Rehearsal) -> None:
    print(f"\nrehearse.sh served in {rehearsal.up_s:.0f} s")
    app = serve_status(rehearsal.layout)["applications"]["acs"]
    assert app["status"] == "RUNNING", dump(app)
    assert set(app["deployments"]) == {"ingress", "runner", "model-tiny-llama", "model-smollm2-135m"}
    found = kinds(rehearsal)
    assert nodes_of(found, "ingress") == ["head", "head"] and nodes_of(found, "runner") == ["head"], dump(found)
    assert nodes_of(found, "model:tiny-llama") == ["models"], dump(found)
    assert "model:smollm2-135m" not in found  # it starts at zero replicas
    assert {kind for kind in found if kind.startswith("raylet:")} == {"raylet:head", "raylet:models",
                                                                       "raylet:harvest"}
    assert len({item["pid"] for kind in ("raylet:head", "raylet:models", "raylet:harvest")
                for item in found[kind]}) == 3


# -- a harvest: its host on the `harvest` node, its links good at either replica -------------------

def test_a_harvests_files_are_readable_through_signed_links_from_either_replica(rehearsal: Rehearsal) -> None:
    key = rehearsal.ledger.new_key("harvest")
    submitted = httpx.post(f"{rehearsal.base}/harvest", headers=auth(key), timeout=60, json={
        "model": "llama-8b", "prompts": ["The sky is", "Grass is green"], "layers": [0, 2]})
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["job_id"]

    def ended() -> dict | None:
        job = get(rehearsal, f"/v1/harvest/{job_id}", key, params={"wait": 5}).json()
        assert job["status"] not in ("failed", "cancelled"), job
        return job if job["status"] == "done" else None

    job = wait_for(ended, 300, "the harvest")
    found = kinds(rehearsal)
    assert nodes_of(found, "harvest_host:tiny-llama") == ["harvest"], dump(found)
    hosts = {item["pid"] for item in found["harvest_host:tiny-llama"]}
    assert not hosts & {item["pid"] for item in found.get("model:tiny-llama", [])}  # no replica's process
    (url,) = job["result"]["shard_urls"]
    # The link that one replica signed, fetched without a key until each replica has answered it.
    answers: dict[str, bytes] = {}
    for _ in range(40):
        request_id = f"link-{uuid.uuid4().hex}"
        answer = httpx.get(url, headers={"X-Request-Id": request_id}, timeout=60)
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-request-id"] == request_id
        answers[request_id] = answer.content
        if len(set(ingress_replica_of(rehearsal.layout, set(answers)).values())) == 2:
            break
    by_replica = ingress_replica_of(rehearsal.layout, set(answers))
    assert len(set(by_replica.values())) == 2, f"{len(answers)} downloads, answered by {by_replica}"
    assert len(set(answers.values())) == 1  # the same file from both
    tensors = load_safetensors(next(iter(answers.values())))
    assert tuple(tensors["prompt_0"].shape) == (2, len(tensors["tokens_0"]), 64)
    # A signature that one replica would refuse, the other refuses too: they hold one secret.
    last = url[-1]
    tampered = [httpx.get(url[:-1] + ("0" if last != "0" else "1"), timeout=60) for _ in range(4)]
    assert {answer.status_code for answer in tampered} == {403}
    assert {answer.json()["error"]["message"] for answer in tampered} == {ALTERED}


# -- scale to zero, and back through the boot stages ----------------------------------------------

def test_a_model_scales_to_zero_and_comes_back_with_its_boot_stages(rehearsal: Rehearsal) -> None:
    key = rehearsal.ledger.new_key("scale")

    def status() -> dict:
        answer = get(rehearsal, "/v1/models/tiny-llama/status", key)
        assert answer.status_code == 200, answer.text
        return answer.json()

    # Nobody has asked tiny-llama anything since the deploy: after its downscale_to_zero_delay_s (60 s,
    # configs/profiles/cluster.yaml) and Serve's look-back, it goes to zero, and its replica's process ends.
    idle_since = time.monotonic()
    wait_for(lambda: not status()["warm"], 240, "tiny-llama at zero", every_s=2)
    wait_for(lambda: "model:tiny-llama" not in kinds(rehearsal), 60, "its replica gone", every_s=2)
    print(f"\ntiny-llama at zero {time.monotonic() - idle_since:.0f} s into this test")
    assert status() == {"id": "tiny-llama", "object": "model.status", "warm": False, "boot": None,
                        "activation_boot": None}

    client = openai.OpenAI(base_url=rehearsal.base, api_key=key, max_retries=0, timeout=600)
    answer: dict[str, Any] = {}

    def complete() -> None:
        started = time.monotonic()
        answer["completion"] = client.completions.create(model="llama-8b", prompt="The sky is", max_tokens=8,
                                                          temperature=0)
        answer["s"] = time.monotonic() - started

    asking = threading.Thread(target=complete)
    asking.start()
    stages: list[str] = []
    while asking.is_alive():
        seen = status()
        stage = seen["boot"]["stage"] if seen["boot"] else ("warm" if seen["warm"] else None)
        if stage is not None and (not stages or stages[-1] != stage):
            stages.append(stage)
        time.sleep(0.25)
    asking.join()
    completion = answer["completion"]
    print(f"cold start through the openai SDK: {answer['s']:.1f} s; stages {stages}")
    assert completion.model == "acs/tiny-llama-random" and completion.usage.completion_tokens == 8
    assert completion.choices[0].finish_reason == "length"
    # Each stage it showed, in the spec's order (a poll may miss a short one), from the first
    assert stages and stages[0] == STAGES[0] and [s for s in STAGES if s in stages] == \
        [s for s in stages if s in STAGES], stages
    assert status()["warm"] is True
    assert nodes_of(kinds(rehearsal), "model:tiny-llama") == ["models"]


# -- two ingress replicas, one state in Redis ---------------------------------------------------

def test_both_ingress_replicas_take_from_one_rate_bucket_per_key(rehearsal: Rehearsal) -> None:
    key = rehearsal.ledger.new_key("buckets")
    sent = int(RATE * 1.5)
    ids = [f"rate-{i}-{uuid.uuid4().hex[:12]}" for i in range(sent)]
    started = time.monotonic()
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda request_id: get(rehearsal, "/v1/models", key, request_id), ids))
    elapsed = time.monotonic() - started
    statuses = [answer.status_code for answer in answers]
    assert set(statuses) <= {200, 429}, set(statuses)
    refused = [answer for answer in answers if answer.status_code == 429]
    # One bucket for the key: 600 at once, then one every 0.1 s. A bucket per replica would have let
    # each replica answer its ~450 with 200.
    assert refused and statuses.count(200) <= RATE + 10 * elapsed + 1, (statuses.count(200), elapsed)
    error = refused[0].json()["error"]
    assert (error["type"], error["code"]) == ("rate_limit_error", "rate_limited")
    assert int(refused[0].headers["retry-after"]) >= 1
    by_replica = ingress_replica_of(rehearsal.layout, set(ids))
    shares = {replica: list(by_replica.values()).count(replica) for replica in set(by_replica.values())}
    print(f"\n{sent} requests in {elapsed:.1f} s: {statuses.count(200)} answered, {len(refused)} refused; "
          f"by replica {shares}")
    assert len(shares) == 2 and min(shares.values()) > sent // 10, shares
    # and both replicas refused: neither had a bucket of its own left
    assert len({by_replica.get(answer.headers["x-request-id"]) for answer in refused} - {None}) == 2


def test_both_ingress_replicas_keep_one_line_per_key(rehearsal: Rehearsal) -> None:
    """17 streams of one key, spread over both replicas by Serve's proxy: 16 run and 1 waits. A line per
    replica would have run all of them, each replica holding fewer than 16. (A scrape of /metrics would
    reach only the replica with fewer streams: the proxy sends a request to the less busy one.)"""
    key = rehearsal.ledger.new_key("line")
    stop = threading.Event()
    ids = [f"line-{i}-{uuid.uuid4().hex[:12]}" for i in range(LINE_RUNNING + 1)]
    chunks = dict.fromkeys(ids, 0)
    statuses: dict[str, int] = {}

    def stream(request_id: str) -> None:
        with httpx.stream("POST", f"{rehearsal.base}/completions", timeout=300,
                          headers={**auth(key), "X-Request-Id": request_id},
                          json={"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2000, "stream": True}
                          ) as answer:
            statuses[request_id] = answer.status_code
            for line in answer.iter_lines():
                if line.startswith("data: {"):
                    chunks[request_id] += 1
                if stop.is_set():
                    return

    threads = [threading.Thread(target=stream, args=(request_id,)) for request_id in ids]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: sum(1 for n in chunks.values() if n) >= LINE_RUNNING, 120, "16 streams under way")
        time.sleep(2)  # a 17th with a line of its own would have its first tokens by now
        waiting = [request_id for request_id, n in chunks.items() if n == 0]
        running = LINE_RUNNING + 1 - len(waiting)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
    time.sleep(1)  # each replica writes a request's log line as the request ends
    by_replica = ingress_replica_of(rehearsal.layout, set(ids))
    shares = {replica: list(by_replica.values()).count(replica) for replica in set(by_replica.values())}
    print(f"\nthe key's 17 streams: {running} ran, {len(waiting)} waited; by replica {shares}")
    assert set(statuses.values()) == {200} and len(waiting) == 1, (statuses, chunks)
    assert len(shares) == 2 and max(shares.values()) < LINE_RUNNING, shares


def test_both_ingress_replicas_report_the_same_counts_on_metrics(rehearsal: Rehearsal) -> None:
    def cluster_counts(samples: dict[tuple[str, str], float]) -> dict[tuple[str, str], float]:
        return {(name, labels): value for (name, labels), value in samples.items()
                if name in ("acs_requests_total", "acs_tokens_total") and "/metrics" not in labels}

    def agreeing() -> dict | None:
        # Each replica adds its counts to Redis every second (ACS_METRICS_FLUSH_S), and the streams that
        # the last test cut settle their Holds as they end: the two agree once those have landed.
        first, second = (cluster_counts(samples) for samples in scrape_each_replica(rehearsal).values())
        return first if first == second else None

    counts = wait_for(agreeing, 30, "the same counts from both replicas", every_s=1)
    # Both replicas' answers are in them: the bucket test's, which each replica answered hundreds of.
    models = next(v for (name, labels), v in counts.items()
                  if name == "acs_requests_total" and 'route="/v1/models"' in labels and 'status="200"' in labels)
    assert models >= RATE


# -- the background kinds, on the Runner's replica on the head ------------------------------------

def signed_in(rehearsal: Rehearsal) -> httpx.Client:
    """A User signed in to the App. The App's cookies are Secure (serve-rehearsal.yaml keeps the cluster's
    ACS_SESSION_COOKIE_SECURE); a browser sends them to 127.0.0.1 over http, as to any loopback address,
    and so does this client: httpx's jar would not, so each cookie it keeps loses the flag."""
    user = new_user(utcnow())

    async def add(session: Any) -> None:
        session.add(user)
        await session.commit()

    rehearsal.ledger.read_ledger(add)
    http = httpx.Client(base_url=rehearsal.layout.root, timeout=60)

    def as_a_browser_on_loopback(response: httpx.Response) -> None:
        for cookie in http.cookies.jar:
            cookie.secure = False

    http.event_hooks["response"] = [as_a_browser_on_loopback]
    assert http.get("/account/csrf").status_code == 204
    http.headers["X-CSRF-Token"] = http.cookies["acs_csrf"]
    answer = http.post("/account/sign-in", json={"email": user.email, "password": PASSWORD})
    assert answer.status_code == 200, answer.text
    http.headers["X-CSRF-Token"] = http.cookies["acs_csrf"]
    return http


@pytest.fixture
def app(rehearsal: Rehearsal) -> Iterator[httpx.Client]:
    http = signed_in(rehearsal)
    try:
        yield http
    finally:
        http.close()


def test_a_job_a_loom_branch_and_a_playground_run_end(rehearsal: Rehearsal, app: httpx.Client) -> None:
    key = rehearsal.ledger.new_key("background")
    body = {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 8, "temperature": 0}
    job = httpx.post(f"{rehearsal.base}/completion-jobs", headers=auth(key), json=body, timeout=60)
    assert job.status_code == 202, job.text
    loom = httpx.post(f"{rehearsal.base}/looms", headers=auth(key), json={"prompt": "The sky is"}, timeout=60)
    assert loom.status_code == 200, loom.text
    loom_id, root = loom.json()["id"], loom.json()["nodes"][0]["id"]
    branch = httpx.post(f"{rehearsal.base}/looms/{loom_id}/nodes/{root}/branch", headers=auth(key), timeout=60,
                        json={"model": "llama-8b", "max_tokens": 4, "n": 2})
    assert branch.status_code == 200, branch.text
    run = app.post("/account/runs", json={"requests": [body]})
    assert run.status_code == 201, run.text
    (run_id,) = [made["id"] for made in run.json()["runs"]]

    def job_done() -> dict | None:
        found = get(rehearsal, f"/v1/completion-jobs/{job.json()['id']}", key).json()
        return found if found["status"] in ("succeeded", "failed", "cancelled") else None

    def nodes_done() -> dict | None:
        nodes = get(rehearsal, f"/v1/looms/{loom_id}", key).json()["nodes"]
        made = [node for node in nodes if node["id"] != root]
        return {"nodes": made} if len(made) == 2 and all(
            node["status"] in ("completed", "failed", "cancelled") for node in made) else None

    def run_done() -> dict | None:
        found = app.get(f"/account/runs/{run_id}").json()
        return found if found["status"] not in ("queued", "running") else None

    assert wait_for(job_done, 180, "the Job")["status"] == "succeeded"
    result = get(rehearsal, f"/v1/completion-jobs/{job.json()['id']}/result", key)
    assert result.status_code == 200 and result.json()["usage"]["completion_tokens"] == 8, result.text
    assert all(node["status"] == "completed" for node in wait_for(nodes_done, 180, "the Branch")["nodes"])
    finished = wait_for(run_done, 180, "the Run")
    assert finished["status"] == "completed" and finished["choices"][0]["text"], finished
    assert nodes_of(kinds(rehearsal), "runner") == ["head"]


def test_a_request_inside_a_killed_ingress_replica_gets_the_error_object(rehearsal: Rehearsal) -> None:
    """kill -9 of both ingress replicas while two long Completions run in them: Serve's proxy has no answer
    of its own for a dead replica, and its HTTP server wrote a text/plain 500. Each cut request gets the
    spec's error object instead (the chaos soak's finding; cluster/proxy_middleware.py), and Serve puts
    new replicas in their place. Last in the module, so no other test meets the replicas' restart."""
    key = rehearsal.ledger.new_key("ingress-kill")
    ids = [f"kill-{i}-{uuid.uuid4().hex[:12]}" for i in range(2)]
    answers: dict[str, httpx.Response] = {}

    def long_completion(request_id: str) -> None:
        answers[request_id] = httpx.post(
            f"{rehearsal.base}/completions", timeout=300, headers={**auth(key), "X-Request-Id": request_id},
            json={"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2000})

    threads = [threading.Thread(target=long_completion, args=(request_id,)) for request_id in ids]
    for thread in threads:
        thread.start()
        time.sleep(0.5)
    time.sleep(2)  # both are inside their replicas, generating
    for replica in kinds(rehearsal)["ingress"]:
        os.kill(replica["pid"], signal.SIGKILL)
    for thread in threads:
        thread.join(timeout=240)
    assert sorted(answers) == sorted(ids)
    for request_id, answer in answers.items():
        assert answer.status_code == 500, answer.text
        assert answer.headers["content-type"] == "application/json"
        assert answer.headers["x-should-retry"] == "false"
        assert answer.headers["x-request-id"] == request_id
        assert answer.json() == {"error": {"message": "The API failed while it handled the request.",
                                           "type": "internal_error", "param": None, "code": "internal_error"},
                                 "request_id": request_id}
    wait_for(lambda: get(rehearsal, "/v1/models", key).status_code == 200, 120, "the new ingress replicas")
