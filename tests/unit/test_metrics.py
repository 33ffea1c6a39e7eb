"""GET /metrics after real traffic through the fake stack, read with prometheus_client's
own parser: requests by route template, status and model with their times, the tokens
of the answers, in flight, the lines, breakers, Holds, background work, harvest
progress, the GPU spend; the token that protects the route; the Grafana dashboard
names only series that exist.

With Redis (the real redis-server on 127.0.0.1:6379, under a key prefix of each test's
own, deleted after it): two app stacks, as two ingress replicas, answer the same
cluster totals; a Job's tokens settled by a Runner beside them reach the ingress's
scrape; with the counts' Redis refusing or silent, requests are answered and their
counts are counted lost."""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
import socket
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator

import pytest
import pytest_asyncio
import redis.asyncio as aioredis
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr
from sqlalchemy import delete, update

from domain.metrics.line import RUNNING, WAITING, MeteredKeyLine
from domain.metrics.scrape import LedgerReadings, scrape_registry
from domain.settings import Settings
from domain.traffic.line import MemoryKeyLine
from cluster.composition import build_runner, compose
from ledger.store.coltypes import utcnow
from ledger.tokens.tables import SpendSample
from ledger.work.tables import Harvest, Work, WorkStatus
from ledger.tokens.spend import set_spend_stop
from tests.conftest import build_stack
from tests.fakes import FakeEngine
from tests.spec import assert_error

MODEL = "tiny-llama"  # what `llama-8b` resolves to in the test profile
SKY = {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 3}
FRESH = pytest.mark.settings(metrics_ledger_cache_s=0.0)  # each scrape reads the ledger
ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "cluster" / "grafana-dashboard.json"
PROMETHEUS = ROOT / "cluster" / "prometheus.yml"
REDIS_URL = "redis://127.0.0.1:6379/0"
# The series counted as requests come and go: one total per cluster with Redis.
COUNTED = ("acs_requests", "acs_request_duration_seconds", "acs_request_first_byte_seconds", "acs_tokens")


class Scrape:
    """One answer of GET /metrics, parsed; `replica` is the name of the replica that answered."""

    def __init__(self, text: str, replica: str = "") -> None:
        self.replica = replica
        self.families = {family.name: family for family in text_string_to_metric_families(text)}
        self.samples = [sample for family in self.families.values() for sample in family.samples]

    def value(self, name: str, **labels: str) -> float:
        """The sample with exactly these labels; 0 when there is none yet."""
        found = [s.value for s in self.samples if s.name == name and s.labels == labels]
        assert len(found) <= 1, (name, labels)
        return found[0] if found else 0.0

    def here(self, name: str, **labels: str) -> float:
        """A series of the answering replica's own (in flight, breakers, lines)."""
        return self.value(name, replica=self.replica, **labels)

    def labels_of(self, name: str) -> list[dict[str, str]]:
        return [s.labels for s in self.samples if s.name == name]


async def scrape(stack: Any, **headers: str) -> Scrape:
    r = await stack.http.get("/metrics", headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    return Scrape(r.text, stack.services.replica)


def delta(before: Scrape, after: Scrape, name: str, **labels: str) -> float:
    return after.value(name, **labels) - before.value(name, **labels)


def requests_delta(before: Scrape, after: Scrape, method: str, route: str, status: int, model: str) -> float:
    labels = dict(method=method, route=route, status=str(status), model=model)
    count = delta(before, after, "acs_requests_total", **labels)
    # Each answer is in both histograms, once.
    assert delta(before, after, "acs_request_duration_seconds_count", **labels) == count
    assert delta(before, after, "acs_request_first_byte_seconds_count", **labels) == count
    return count


async def complete(stack: Any, body: dict) -> dict:
    r = await stack.http.post("/v1/completions", json=body, headers=stack.auth())
    assert r.status_code == 200, r.text
    return r.json()["usage"]


async def stream_usage(stack: Any, body: dict) -> dict:
    r = await stack.http.post("/v1/completions", headers=stack.auth(),
                              json={**body, "stream": True, "stream_options": {"include_usage": True}})
    assert r.status_code == 200, r.text
    events = [json.loads(line[6:]) for line in r.text.splitlines()
              if line.startswith("data: {")]
    (usage,) = [event["usage"] for event in events if event.get("usage")]
    return usage


# -- requests and tokens --------------------------------------------------------------------------

async def test_requests_are_counted_by_route_template_status_and_model(fake_stack: Any) -> None:
    stack, auth = fake_stack, fake_stack.auth()
    before = await scrape(stack)
    await complete(stack, SKY)
    await stream_usage(stack, SKY)
    missing = await stack.http.post("/v1/completions", json={**SKY, "model": "no-such-model"}, headers=auth)
    assert_error(missing, 400, "model_not_found")
    assert (await stack.http.post("/v1/completions", json=SKY)).status_code == 401
    loom_id = str(uuid.uuid4())
    assert (await stack.http.get(f"/v1/looms/{loom_id}", headers=auth)).status_code == 404
    assert (await stack.http.get("/v1/no-such-route", headers=auth)).status_code == 404
    job = await stack.http.post("/v1/completion-jobs", json=SKY, headers=auth)
    assert job.status_code == 202, job.text
    assert (await stack.http.get(f"/v1/completion-jobs/{job.json()['id']}", headers=auth)).status_code == 200
    after = await scrape(stack)
    await _drop_work(stack, [job.json()["id"]])

    assert requests_delta(before, after, "POST", "/v1/completions", 200, MODEL) == 2
    assert requests_delta(before, after, "POST", "/v1/completions", 400, "") == 1  # no model resolved
    assert requests_delta(before, after, "POST", "/v1/completions", 401, "") == 1
    assert requests_delta(before, after, "GET", "/v1/looms/{loom_id}", 404, "") == 1
    assert requests_delta(before, after, "GET", "unmatched", 404, "") == 1
    assert requests_delta(before, after, "POST", "/v1/completion-jobs", 202, MODEL) == 1
    assert requests_delta(before, after, "GET", "/v1/completion-jobs/{job_id}", 200, "") == 1
    routes = {labels["route"] for labels in after.labels_of("acs_requests_total")}
    assert not [route for route in routes if loom_id in route or "no-such-route" in route]
    assert "/metrics" not in routes  # the scrapes themselves are not counted


async def test_an_in_process_stack_counts_on_its_own_even_where_the_environment_names_a_redis(
        sqlite_sessions: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # serve_instance names the cluster's Redis in the environment for the Serve stack's ingress; a
    # fake stack that took it would count into the cluster's tally, where another stack's late
    # flush lands in this test's window.
    monkeypatch.setenv("ACS_REDIS_URL", REDIS_URL)
    first, second = [await build_stack(FakeEngine(), sqlite_sessions) for _ in range(2)]
    try:
        assert first.services.settings.redis_url is None and not first.services.counts.shared
        before = await scrape(second)
        assert (await first.http.get(f"/v1/looms/{uuid.uuid4()}", headers=first.auth())).status_code == 404
        assert requests_delta(before, await scrape(second), "GET", "/v1/looms/{loom_id}", 404, "") == 0
    finally:
        for stack in (first, second):
            await stack.http.aclose()


@pytest.mark.fake(delay_s=0.1)  # three tokens: about 0.3 s to the end, 0.1 s to the first
async def test_a_stream_is_timed_to_its_last_byte_and_to_its_first(fake_stack: Any) -> None:
    stack = fake_stack
    before = await scrape(stack)
    await stream_usage(stack, SKY)
    after = await scrape(stack)
    labels = dict(method="POST", route="/v1/completions", status="200", model=MODEL)
    total = delta(before, after, "acs_request_duration_seconds_sum", **labels)
    first = delta(before, after, "acs_request_first_byte_seconds_sum", **labels)
    assert 0.05 <= first < total and total >= 0.25
    assert delta(before, after, "acs_request_duration_seconds_bucket", **labels, le="0.1") == 0
    assert delta(before, after, "acs_request_duration_seconds_bucket", **labels, le="+Inf") == 1


async def test_tokens_in_and_out_are_the_usage_of_the_answers(fake_stack: Any) -> None:
    stack = fake_stack
    before = await scrape(stack)
    usages = [await complete(stack, SKY), await stream_usage(stack, {**SKY, "max_tokens": 5}),
              await complete(stack, {**SKY, "prompt": ["Grass is", "Snow is white and"], "n": 2})]
    after = await scrape(stack)
    tokens = dict(model=MODEL, source="api")
    assert delta(before, after, "acs_tokens_total", **tokens, direction="in") == sum(u["prompt_tokens"] for u in usages)
    assert delta(before, after, "acs_tokens_total", **tokens, direction="out") == sum(
        u["completion_tokens"] for u in usages)


# -- one count per cluster (Redis) ------------------------------------------------------------------

StartStacks = Callable[..., Awaitable[list[Any]]]


@pytest_asyncio.fixture
async def redis_stacks(sqlite_sessions: Any) -> AsyncIterator[StartStacks]:
    """`await redis_stacks(n, **settings)`: n app stacks on one ledger and one Redis, as n ingress
    replicas of a cluster, counting under a prefix of this test's own (deleted after it)."""
    prefix = f"acs-test:metrics:{uuid.uuid4().hex}:"
    stacks: list[Any] = []

    async def start(count: int, **settings: Any) -> list[Any]:
        made = [await build_stack(FakeEngine(), sqlite_sessions, redis_url=REDIS_URL, metrics_redis_prefix=prefix,
                                  **settings) for _ in range(count)]
        stacks.extend(made)
        return made

    yield start
    for stack in stacks:
        await stack.http.aclose()
        await stack.services.counts.aclose()
        await stack.services.traffic.aclose()
    client = aioredis.Redis.from_url(REDIS_URL)
    keys = [key async for key in client.scan_iter(match=prefix + "*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()


def counted_samples(scrape: Scrape) -> list[tuple[str, dict[str, str], float]]:
    return sorted(((s.name, s.labels, s.value) for name in COUNTED for s in scrape.families[name].samples),
                  key=repr)


async def test_two_ingress_replicas_answer_one_set_of_cluster_totals(redis_stacks: StartStacks,
                                                                     fake_stack: Any) -> None:
    a, b = await redis_stacks(2)
    a.replace_services(replica="ingress-a")
    b.replace_services(replica="ingress-b")
    usages = [await complete(a, SKY), await stream_usage(a, SKY), await complete(b, SKY)]
    assert (await b.http.get("/v1/no-such-route", headers=b.auth())).status_code == 404
    # What each replica's flusher does within ACS_METRICS_FLUSH_S (the one scraped also flushes itself).
    await asyncio.gather(a.services.counts.flush(), b.services.counts.flush())
    on_a, on_b = await scrape(a), await scrape(b)

    assert counted_samples(on_a) == counted_samples(on_b)  # whichever replica Prometheus reaches
    for one in (on_a, on_b):
        assert one.value("acs_cluster_counts_read_ok") == 1
        labels = dict(method="POST", route="/v1/completions", status="200", model=MODEL)
        assert one.value("acs_requests_total", **labels) == 3  # two at a, one at b
        assert one.value("acs_request_duration_seconds_count", **labels) == 3
        assert one.value("acs_request_duration_seconds_bucket", **labels, le="+Inf") == 3
        assert one.value("acs_request_first_byte_seconds_count", **labels) == 3
        assert one.value("acs_requests_total", method="GET", route="unmatched", status="404", model="") == 1
        tokens = dict(model=MODEL, source="api")
        assert one.value("acs_tokens_total", **tokens, direction="in") == sum(u["prompt_tokens"] for u in usages)
        assert one.value("acs_tokens_total", **tokens, direction="out") == sum(
            u["completion_tokens"] for u in usages)
        # The gauges a process keeps for itself name the replica that answered.
        assert {labels["replica"] for labels in one.labels_of("acs_in_flight")} == {one.replica}
    # The cluster's totals look as the embedded default's one process shows its own.
    await complete(fake_stack, SKY)
    alone = await scrape(fake_stack)
    assert {(n, on_a.families[n].type) for n in COUNTED} == {(n, alone.families[n].type) for n in COUNTED}
    assert {s.name for n in COUNTED for s in on_a.families[n].samples} <= {
        s.name for n in COUNTED for s in alone.families[n].samples}


async def test_a_jobs_tokens_settled_on_the_runner_reach_the_ingress_scrape(redis_stacks: StartStacks) -> None:
    (stack,) = await redis_stacks(1)
    await _clear_work(stack)  # the Runner would run any row queued by another test
    job = await stack.http.post("/v1/completion-jobs", json=SKY, headers=stack.auth())
    assert job.status_code == 202, job.text
    before = await scrape(stack)
    async with _runner_beside(stack) as runner_services:
        assert runner_services.counts is not stack.services.counts  # the Runner's own process, in the cluster
        result = await _job_result(stack, job.json()["id"])
        # Only the Runner's own flusher carries its counts to Redis.
        tokens = dict(model=MODEL, source="job")
        after = await _scrape_until(stack, lambda s: delta(before, s, "acs_tokens_total", **tokens, direction="out")
                                    == result["usage"]["completion_tokens"])
    assert delta(before, after, "acs_tokens_total", **tokens, direction="in") == result["usage"]["prompt_tokens"]
    assert delta(before, after, "acs_tokens_total", model=MODEL, source="api", direction="out") == 0
    await _drop_work(stack, [job.json()["id"]])


@pytest.mark.parametrize("outage", ["refused", "silent"])
async def test_with_the_counts_redis_down_requests_are_answered_and_counted_lost(
        redis_stacks: StartStacks, outage: str) -> None:
    (stack,) = await redis_stacks(1, health_timeout_s=0.3, metrics_flush_s=0.05)
    tally = stack.services.counts.tally
    with _dead_redis(outage) as dead_url:
        live, tally.client = tally.client, aioredis.Redis.from_url(dead_url)
        try:
            started = time.perf_counter()
            await complete(stack, SKY)  # the rate buckets and the line still have their Redis
            assert time.perf_counter() - started < 0.3  # no wait for the counts' Redis
            await asyncio.sleep(0.1)  # a flush or two fail meanwhile
            r = await stack.http.get("/metrics")
            assert r.status_code == 200, r.text
            down = Scrape(r.text, stack.services.replica)
            assert down.value("acs_cluster_counts_read_ok") == 0
            assert not set(COUNTED) & set(down.families)  # left out, not shown as zero
            assert down.here("acs_in_flight", model=MODEL) == 0  # what this replica knows still shows
        finally:
            await tally.client.aclose()
            tally.client = live
    back = await scrape(stack)
    assert back.value("acs_cluster_counts_read_ok") == 1
    assert back.value("acs_metrics_lost_total", series="acs_requests") == 1
    assert back.value("acs_metrics_lost_total", series="acs_request_duration_seconds") == 1
    assert back.value("acs_metrics_lost_total", series="acs_tokens") == 2  # in and out
    assert back.value("acs_requests_total", method="POST", route="/v1/completions", status="200", model=MODEL) == 0
    await complete(stack, SKY)
    again = await scrape(stack)
    assert again.value("acs_requests_total", method="POST", route="/v1/completions", status="200", model=MODEL) == 1


# -- read at each scrape ----------------------------------------------------------------------------

@FRESH
@pytest.mark.fake(delay_s=0.05)
async def test_in_flight_the_line_and_holds_while_a_stream_runs_then_none(fake_stack: Any) -> None:
    stack = fake_stack
    before = await scrape(stack)
    assert before.here("acs_in_flight", model=MODEL) == 0
    assert before.here("acs_in_flight_limit", model=MODEL) == stack.services.settings.max_in_flight_per_model
    running = asyncio.create_task(stream_usage(stack, {**SKY, "max_tokens": 40}))
    # The model's place comes before the Hold: wait for both.
    during = await _scrape_until(stack, lambda s: s.here("acs_in_flight", model=MODEL) == 1 and delta(
        before, s, "acs_holds_running", model=MODEL, source="api") == 1)
    assert during.here("acs_line_requests", state="running") == 1
    assert during.here("acs_line_requests", state="waiting") == 0
    assert during.here("acs_line_longest", state="running") == 1
    await running
    after = await scrape(stack)
    assert after.here("acs_in_flight", model=MODEL) == 0
    assert after.here("acs_line_requests", state="running") == 0
    assert after.value("acs_holds_running", model=MODEL, source="api") == before.value(
        "acs_holds_running", model=MODEL, source="api")


async def test_the_line_counts_its_waiting_and_running_requests() -> None:
    line = MeteredKeyLine(MemoryKeyLine(max_running=1, max_waiting=4))
    first = line.place("key-a")
    await first.__aenter__()
    waiter = asyncio.create_task(_hold_place(line, "key-a"))
    other = asyncio.create_task(_hold_place(line, "key-b"))
    await asyncio.sleep(0.01)
    assert (line.total(WAITING), line.longest(WAITING)) == (1, 1)
    assert (line.total(RUNNING), line.longest(RUNNING)) == (2, 1)  # one of each key
    await first.__aexit__(None, None, None)
    await asyncio.gather(waiter, other)
    assert (line.total(WAITING), line.total(RUNNING), line.longest(RUNNING)) == (0, 0, 0)


@pytest.mark.fake(fail_before_first=RuntimeError("the engine fell over"))
@pytest.mark.settings(breaker_failures=3)
async def test_failures_in_a_row_open_the_breaker(fake_stack: Any) -> None:
    stack = fake_stack
    before = await scrape(stack)
    assert (before.here("acs_breaker_state", model=MODEL), before.here("acs_breaker_failures", model=MODEL)) == (0, 0)
    statuses = [(await stack.http.post("/v1/completions", json=SKY, headers=stack.auth())).status_code
                for _ in range(4)]
    assert statuses == [502, 502, 502, 503]
    after = await scrape(stack)
    assert after.here("acs_breaker_state", model=MODEL) == 2  # open
    assert after.here("acs_breaker_failures", model=MODEL) == 3
    assert requests_delta(before, after, "POST", "/v1/completions", 502, MODEL) == 3
    assert requests_delta(before, after, "POST", "/v1/completions", 503, MODEL) == 1


@FRESH
async def test_background_work_by_kind_and_status_and_harvest_progress(fake_stack: Any) -> None:
    stack, auth = fake_stack, fake_stack.auth()
    before = await scrape(stack)
    job = await stack.http.post("/v1/completion-jobs", json=SKY, headers=auth)
    harvest = await stack.http.post("/v1/harvest", json={"model": "llama-8b", "prompts": ["a", "b", "c"]},
                                    headers=auth)
    assert (job.status_code, harvest.status_code) == (202, 202), (job.text, harvest.text)
    ids = [job.json()["id"], harvest.json()["job_id"]]
    try:
        queued = await scrape(stack)
        assert delta(before, queued, "acs_work", kind="job", status="queued") == 1
        assert delta(before, queued, "acs_work", kind="harvest", status="queued") == 1
        await _harvest_runs(stack, ids[1], prompts_done=2)
        running = await scrape(stack)
        assert delta(queued, running, "acs_work", kind="harvest", status="queued") == -1
        assert delta(queued, running, "acs_work", kind="harvest", status="running") == 1
        assert delta(before, running, "acs_harvest_prompts", model=MODEL) == 3
        assert delta(before, running, "acs_harvest_prompts_done", model=MODEL) == 2
        kinds = {(labels["kind"], labels["status"]) for labels in running.labels_of("acs_work")}
        assert {("node", "failed"), ("run", "cancelled")} <= kinds  # every pair, 0 when none
    finally:
        await _drop_work(stack, ids)


@FRESH
async def test_the_gpu_spend_of_the_last_24_hours_and_the_stop(fake_stack: Any) -> None:
    stack, now = fake_stack, utcnow()
    before = await scrape(stack)
    samples = [SpendSample(at=now - timedelta(hours=h), model_id=MODEL, replicas=1, gpus=1.0, seconds=60.0, usd=usd)
               for h, usd in ((1, 2.5), (23, 10.0), (25, 1000.0))]
    async with stack.services.ledger.write_sessions() as session:
        session.add_all(samples)
        await session.commit()
        await set_spend_stop(session, True, "metrics test")
    try:
        after = await scrape(stack)
        assert delta(before, after, "acs_gpu_spend_usd_24h") == pytest.approx(12.5)
        assert after.value("acs_spend_stop_locked") == 1
        assert after.value("acs_ledger_read_ok") == 1
    finally:
        async with stack.services.ledger.write_sessions() as session:
            await session.exec(delete(SpendSample).where(SpendSample.id.in_([s.id for s in samples])))
            await session.commit()
            await set_spend_stop(session, False)


async def test_the_ledger_is_read_once_per_interval_and_a_failure_shows() -> None:
    reads: list[int] = []

    def failing_sessions() -> Any:
        reads.append(1)
        raise ConnectionError("the database is away")

    clock = [100.0]
    readings = LedgerReadings(failing_sessions, max_age_s=5.0, timeout_s=1.0, clock=lambda: clock[0])
    assert await asyncio.gather(readings.latest(), readings.latest()) == [None, None]
    assert len(reads) == 1  # scrapes at once, and within 5 s, share one read
    clock[0] += 5.0
    assert await readings.latest() is None and len(reads) == 2


async def test_a_failed_ledger_read_leaves_its_series_out(fake_stack: Any) -> None:
    services = fake_stack.services
    registry = scrape_registry(services, await services.counts.families(), None)
    after = Scrape(generate_latest(registry).decode(), services.replica)
    assert after.value("acs_ledger_read_ok") == 0
    assert "acs_holds_running" not in after.families and "acs_work" not in after.families
    assert after.here("acs_in_flight", model=MODEL) == 0  # what this process knows still shows


# -- the token ----------------------------------------------------------------------------------------

@pytest.mark.settings(metrics_token="metrics-secret")
async def test_with_a_token_set_a_scrape_needs_it(fake_stack: Any) -> None:
    stack = fake_stack
    assert_error(await stack.http.get("/metrics"), 401, "missing_authorization", type="invalid_request_error")
    wrong = await stack.http.get("/metrics", headers={"Authorization": "Bearer not-the-secret"})
    assert_error(wrong, 401, "invalid_api_key")
    api_key = await stack.http.get("/metrics", headers=stack.auth())  # an API key is not the token
    assert_error(api_key, 401, "invalid_api_key")
    assert "acs_requests" in (await scrape(stack, Authorization="Bearer metrics-secret")).families


async def test_in_development_without_a_token_the_route_is_open(fake_stack: Any) -> None:
    assert fake_stack.services.settings.environment == "development"
    assert fake_stack.services.settings.metrics_token.get_secret_value() == ""
    assert "acs_in_flight" in (await scrape(fake_stack)).families


EMPTY_TOKEN = (r"ACS_METRICS_TOKEN is empty, and ACS_ENVIRONMENT is 'production': GET /metrics would answer "
               r"anyone who reaches the API\. Set it to a token of your own")


@pytest.mark.parametrize("token", ["", "  "])
def test_outside_development_an_empty_token_is_refused(token: str, monkeypatch: pytest.MonkeyPatch) -> None:
    production = dict(environment="production", harvest_link_secret=SecretStr("s" * 64),
                      database_url="postgresql+asyncpg://acs@db.internal:5432/acs",
                      redis_url="redis://redis.internal:6379/0", public_base_url="https://api.example.org")
    with pytest.raises(ValueError, match=EMPTY_TOKEN):
        Settings(**production, metrics_token=SecretStr(token))
    # As Ray hands an unset ${ACS_METRICS_TOKEN} of cluster/serve-gpu.yaml to the replicas.
    monkeypatch.setenv("ACS_METRICS_TOKEN", token)
    with pytest.raises(ValueError, match=EMPTY_TOKEN):
        Settings(**production)
    monkeypatch.setenv("ACS_METRICS_TOKEN", "the operator's token")
    assert Settings(**production).metrics_token.get_secret_value() == "the operator's token"


# -- the dashboard --------------------------------------------------------------------------------------

async def test_the_dashboard_names_our_series_and_serves_only(redis_stacks: StartStacks) -> None:
    (stack,) = await redis_stacks(1)  # the cluster's: every series of ours, those of Redis too
    await complete(stack, SKY)
    ours = await scrape(stack)
    dashboard = json.loads(DASHBOARD.read_text())
    (source,) = [v for v in dashboard["templating"]["list"] if v["name"] == "DS_PROMETHEUS"]
    assert (source["type"], source["query"]) == ("datasource", "prometheus")
    panels = _panels(dashboard)
    assert all(panel["datasource"]["uid"] == "${DS_PROMETHEUS}" for panel in panels)
    used = {name for panel in panels for target in panel["targets"] for name in metric_names(target["expr"])}
    exposed = {sample_name for family in ours.families.values() for sample_name in _sample_names(family)}
    serve = serve_series()
    assert [name for name in used if name not in exposed and not _is_serve(name, serve)] == []
    # Every series of ours has a panel, and so do Serve's replica counts.
    assert [f for f in ours.families if f.startswith("acs_") and not set(_sample_names(ours.families[f])) & used] == []
    assert {"ray_serve_deployment_replica_healthy", "ray_serve_autoscaling_target_replicas"} <= used


def test_the_prometheus_config_scrapes_the_ingress_with_the_token_and_every_ray_node() -> None:
    config = yaml.safe_load(PROMETHEUS.read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert jobs["acs-ingress"]["metrics_path"] == "/metrics"
    assert jobs["acs-ingress"]["authorization"]["type"] == "Bearer"
    assert jobs["ray"]["file_sd_configs"] == [{"files": ["/tmp/ray/prom_metrics_service_discovery.json"]}]


def test_the_name_reader_skips_functions_labels_and_keywords() -> None:
    expr = ('histogram_quantile(0.95, sum by (le, route) (rate(acs_request_duration_seconds_bucket'
            '{route!="unmatched", model=~"$model"}[5m]))) / on() group_left sum(ray_serve_x offset 5m)')
    assert metric_names(expr) == {"acs_request_duration_seconds_bucket", "ray_serve_x"}


# -- helpers ---------------------------------------------------------------------------------------------

PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or",
                "unless", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The series a PromQL expression reads: no function, label matcher, grouping list or keyword."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings: label values, regexes
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    names = re.findall(r"(?<![\w.$])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", expr)
    return {name for name in names if name.lower() not in PROMQL_WORDS and not re.fullmatch(r"\d+[smhdwy]", name)}


def _sample_names(family: Any) -> list[str]:
    suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_count", "_sum"]}.get(family.type, [""])
    return [family.name + suffix for suffix in suffixes]


def serve_series() -> set[str]:
    """The `serve_*` metric names that the installed Ray Serve defines (Ray exports them as `ray_serve_*`)."""
    import ray.serve

    names: set[str] = set()
    for source in Path(ray.serve.__file__).parent.rglob("*.py"):
        for name in re.findall(r'"(serve_[a-z_{}]+)"', source.read_text(errors="ignore")):
            # The proxy's series are named per protocol: f"serve_num_{protocol_name}_requests".
            names |= {name.replace("{protocol_name}", protocol) for protocol in ("http", "grpc")}
    return names


def _is_serve(name: str, serve: set[str]) -> bool:
    base = re.sub(r"_(total|bucket|count|sum)$", "", name.removeprefix("ray_"))
    return name.startswith("ray_serve_") and base in serve


def _panels(dashboard: dict) -> list[dict]:
    panels = []
    for panel in dashboard["panels"]:
        panels += [panel] if panel["type"] != "row" else []
        panels += panel.get("panels", [])
    return [panel for panel in panels if panel.get("targets")]


async def _scrape_until(stack: Any, condition: Any, timeout_s: float = 5.0) -> Scrape:
    async with asyncio.timeout(timeout_s):
        while not condition(found := await scrape(stack)):
            await asyncio.sleep(0.02)
    return found


async def _hold_place(line: MeteredKeyLine, key_id: str) -> None:
    async with line.place(key_id):
        await asyncio.sleep(0.02)


@contextlib.contextmanager
def _dead_redis(outage: str) -> Iterator[str]:
    """A Redis address that refuses connections, or one that takes them and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    if outage == "refused":
        listener.close()  # nothing listens there now
    else:
        listener.listen(16)  # the kernel takes the connection; nobody reads or answers
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        listener.close()


@contextlib.asynccontextmanager
async def _runner_beside(stack: Any) -> AsyncIterator[Any]:
    """A Runner of the same cluster (its own services, Counts and Redis client), as its replica would be."""
    base = stack.services
    config = base.settings.model_copy(update=dict(runner_lease_s=1.0, runner_poll_s=0.05, metrics_flush_s=0.1))
    clients = {model_id: gateway.client for model_id, gateway in base.gateways.items()}
    services = compose(config, base.catalog, clients, base.sessions.kw["bind"], tokenizers=base.tokenizers)
    runner = build_runner(dataclasses.replace(services, gateways=base.gateways))
    runner.start()
    try:
        yield services
    finally:
        await runner.stop()
        await services.counts.aclose()
        await services.traffic.aclose()


async def _job_result(stack: Any, job_id: str, timeout_s: float = 10.0) -> dict:
    async with asyncio.timeout(timeout_s):
        while (r := await stack.http.get(f"/v1/completion-jobs/{job_id}/result", headers=stack.auth())).status_code \
                == 202:
            await asyncio.sleep(0.05)
    assert r.status_code == 200, r.text
    return r.json()


async def _clear_work(stack: Any) -> None:
    async with stack.services.ledger.write_sessions() as session:
        await session.exec(delete(Harvest))  # a harvest's row refers to its work row
        await session.exec(delete(Work))
        await session.commit()


async def _harvest_runs(stack: Any, work_id: str, prompts_done: int) -> None:
    async with stack.services.ledger.write_sessions() as session:
        await session.exec(update(Work).where(Work.id == uuid.UUID(work_id)).values(status=WorkStatus.running))
        await session.exec(update(Harvest).where(Harvest.work_id == uuid.UUID(work_id))
                           .values(prompts_done=prompts_done))
        await session.commit()


async def _drop_work(stack: Any, work_ids: list[str]) -> None:
    """Leave no rows: other modules count the work table."""
    ids = [uuid.UUID(work_id) for work_id in work_ids]
    async with stack.services.ledger.write_sessions() as session:
        await session.exec(delete(Harvest).where(Harvest.work_id.in_(ids)))
        await session.exec(delete(Work).where(Work.id.in_(ids)))
        await session.commit()
