"""The Server-Timing header of POST /v1/completions (api/server_timing.py, the stages of
domain/timing.py), over the fake engine, and the recorder and the proxy's stamp on their own."""
from __future__ import annotations

import re
import time

import pytest

from api.server_timing import PROXY_HEADER, ServerTimingMiddleware
from domain.timing import Timings, parse
from cluster.proxy_middleware import RequestIdGuard

SKY = {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2}
# W3C Server-Timing: metric names are tokens, each with a dur in milliseconds.
METRIC = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+;dur=\d+(\.\d+)?$")
BEFORE_ENGINE = ["auth", "body", "validate", "stop", "line", "hold"]
ENGINE_PARTS = {"vllm", "queue", "prefill", "decode"}


def stages_of(response) -> dict[str, float]:
    header = response.headers["server-timing"]
    for item in header.split(", "):
        assert METRIC.match(item), header
    return parse(header)


def assert_sums_to_total(stages: dict[str, float]) -> None:
    top = sum(ms for name, ms in stages.items() if name not in ENGINE_PARTS | {"total"})
    assert top <= stages["total"] + 0.05  # rounding of each to 0.01 ms
    assert all(ms >= 0 for ms in stages.values())


async def test_a_completion_has_its_stages(fake_stack):
    response = await fake_stack.http.post("/v1/completions", headers=fake_stack.auth(), json=SKY)
    assert response.status_code == 200, response.text
    stages = stages_of(response)
    assert list(stages)[:len(BEFORE_ENGINE)] == BEFORE_ENGINE
    for name in ("engine", "assemble", "settle", "serialize", "total"):
        assert name in stages
    assert "proxy" not in stages  # no Serve proxy in process
    assert_sums_to_total(stages)
    assert response.headers["timing-allow-origin"] == "*"


@pytest.mark.fake(delay_s=0.05)
async def test_the_engine_stage_holds_the_engine_time(fake_stack):
    response = await fake_stack.http.post("/v1/completions", headers=fake_stack.auth(), json=SKY)
    stages = stages_of(response)
    assert stages["engine"] >= 2 * 50 * 0.9
    assert_sums_to_total(stages)


async def test_a_stream_has_the_stages_before_its_first_event(fake_stack):
    response = await fake_stack.http.post("/v1/completions", headers=fake_stack.auth(), json={**SKY, "stream": True})
    assert response.status_code == 200
    stages = stages_of(response)
    assert list(stages)[:len(BEFORE_ENGINE)] + ["engine"] == BEFORE_ENGINE + ["engine"]
    assert not {"settle", "serialize", "decode"} & set(stages)
    assert_sums_to_total(stages)


async def test_a_refused_request_has_the_stages_it_passed(fake_stack):
    response = await fake_stack.http.post("/v1/completions", headers=fake_stack.auth(), json={**SKY, "n": "2"})
    assert response.status_code == 400
    stages = stages_of(response)
    assert {"auth", "body", "validate", "total"} <= set(stages) and "hold" not in stages


async def test_cors_lets_a_page_read_it(fake_stack):
    headers = {**fake_stack.auth(), "Origin": "https://page.example"}
    response = await fake_stack.http.post("/v1/completions", headers=headers, json=SKY)
    exposed = [h.strip().lower() for h in response.headers["access-control-expose-headers"].split(",")]
    assert "server-timing" in exposed


async def test_other_routes_have_none(fake_stack):
    response = await fake_stack.http.get("/v1/models", headers=fake_stack.auth())
    assert "server-timing" not in response.headers


async def test_the_proxy_stamp_gives_the_proxy_stage(fake_stack):
    headers = {**fake_stack.auth(), "x-acs-proxy-start": f"{time.time() - 0.25:.6f}"}
    stages = stages_of(await fake_stack.http.post("/v1/completions", headers=headers, json=SKY))
    assert 250 <= stages["proxy"] < 5000
    assert stages["total"] >= stages["proxy"]
    assert_sums_to_total(stages)


@pytest.mark.parametrize("stamp", ["soon", f"{time.time() + 3600:.0f}", "0"])
async def test_an_implausible_stamp_is_left_out(fake_stack, stamp):
    headers = {**fake_stack.auth(), "x-acs-proxy-start": stamp}
    response = await fake_stack.http.post("/v1/completions", headers=headers, json=SKY)
    assert response.status_code == 200 and "proxy" not in stages_of(response)


async def test_the_proxy_stamps_its_time_and_replaces_a_callers():
    seen = {}

    async def app(scope, receive, send):
        seen.update((k, v) for k, v in scope["headers"])

    before = time.time()
    await RequestIdGuard(app)({"type": "http", "headers": [(PROXY_HEADER, b"1.0")]}, None, None)
    assert before <= float(seen[PROXY_HEADER]) <= time.time()


def test_nested_stages_count_once():
    timings = Timings()
    with timings.stage("outer"):
        time.sleep(0.01)
        with timings.stage("inner"):
            time.sleep(0.02)
    assert timings.durations["inner"] >= 0.02
    assert 0.01 <= timings.durations["outer"] < 0.02
    stages = parse(timings.header())
    assert stages["outer"] + stages["inner"] <= stages["total"]


def test_the_engine_figures_keep_the_slowest_prompt():
    timings = Timings()
    timings.engine({"prefill": 0.2, "decode": 0.1})
    timings.engine({"prefill": 0.1, "decode": 0.3, "other": 9.0})
    assert timings.durations == {"prefill": 0.2, "decode": 0.3}


def test_the_middleware_is_in_the_app():
    from api.app import create_app

    assert ServerTimingMiddleware in [m.cls for m in create_app().user_middleware]


async def test_an_app_under_a_route_prefix_times_its_completions(fake_stack):
    """Serve mounts an application at a prefix: its scope's path and root_path both hold it."""
    import httpx

    transport = httpx.ASGITransport(app=fake_stack.app, root_path="/prefixed")
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as client:
        response = await client.post("/prefixed/v1/completions", headers=fake_stack.auth(), json=SKY)
    assert response.status_code == 200, response.text
    assert "hold" in stages_of(response)
