"""End to end: a model scaled to zero starts on the real Serve stack while a
client polls its status route, and sees each boot stage in order, then Warm.

The slow-boot profile's model is the tiny Llama on the real vLLM engine, whose
worker pauses inside its weight load and its memory profiling
(tests/e2e/slow_load.py). A Ray actor holds the CPUs that the model's replica
needs for a while, as a busy cluster holds its GPUs: Serve's replica waits for
its resources, and the request waits for a GPU.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Iterator

import httpx
import pytest
import ray
from ray import serve

from tests.cpu_holder import hold_the_free_cpus
from tests.serve_fixtures import ServeInstance

APP, PREFIX, DEPLOYMENT = "acs-boot", "/boot", "model-slow-llama"
ORDER = ["waiting_for_gpu", "container_started", "weights_loading", "weights_loaded"]
POLL_S = 0.25


@pytest.fixture(scope="module")
def slow_boot(serve_instance: ServeInstance) -> Iterator[tuple[str, str]]:
    """The slow-boot profile under /boot: its /v1 address and a new user's key."""
    with serve_instance.application("slow-boot", APP, PREFIX) as base:
        yield base, serve_instance.new_key("boot")


def replicas() -> dict[str, int]:
    """Serve's count of the model's replicas by state."""
    states = serve.status().applications[APP].deployments[DEPLOYMENT].replica_states
    return {str(getattr(state, "value", state)): n for state, n in states.items() if n}


def status(base: str, key: str) -> dict:
    response = httpx.get(f"{base}/models/slow-llama/status", headers={"Authorization": f"Bearer {key}"},
                         timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def poll(base: str, key: str, until: Any, timeout_s: float, *, must: bool = True) -> list[tuple[float, dict]]:
    """Statuses with their times, until one satisfies `until` (or, unless `must`, the time is up)."""
    seen: list[tuple[float, dict]] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        seen.append((time.monotonic(), status(base, key)))
        if until(seen[-1][1]):
            return seen
        time.sleep(POLL_S)
    assert not must, f"no such status within {timeout_s} s; last seen: {seen[-3:]}"
    return seen


def stages_in_order(seen: list[tuple[float, dict]]) -> list[str]:
    stages: list[str] = []
    for _, s in seen:
        stage = s["boot"]["stage"] if s["boot"] else None
        if stage is not None and (not stages or stages[-1] != stage):
            stages.append(stage)
    return stages


def test_a_cold_model_starts_through_each_stage(slow_boot: tuple[str, str]) -> None:
    base, key = slow_boot
    # Scaled to zero, and the status route starts nothing however often it is read.
    for _ in range(8):
        assert status(base, key) == {"id": "slow-llama", "object": "model.status", "warm": False,
                                     "boot": None, "activation_boot": None}
        time.sleep(POLL_S)
    assert replicas() == {}

    holder = hold_the_free_cpus()
    answer: dict[str, Any] = {}
    body = {"model": "slow-llama", "prompt": "The sky is", "max_tokens": 2}

    def complete() -> None:
        answer["response"] = httpx.post(f"{base}/completions", json=body, timeout=180,
                                        headers={"Authorization": f"Bearer {key}"})

    sent = time.monotonic()
    request = threading.Thread(target=complete)
    request.start()
    try:
        # Serve asks for a replica, and Ray has no CPUs for it: it stays without an actor.
        waiting = poll(base, key, lambda s: s["boot"] is not None, 30)
        waiting += poll(base, key, lambda s: replicas() == {"STARTING": 1}, 30)
        waiting += poll(base, key, lambda s: False, 2.0, must=False)
    finally:
        ray.kill(holder)
    starting = poll(base, key, lambda s: s["warm"], 150)
    request.join(timeout=60)

    seen = waiting + starting
    assert stages_in_order(seen) == ORDER, [s for _, s in seen]
    for at, s in waiting:
        if s["boot"] is not None:
            assert s["warm"] is False and s["boot"]["stage"] == "waiting_for_gpu"
            # It counts from the waiting request.
            assert abs(s["boot"]["stage_age_s"] - (at - sent)) <= 2
    container_ages = [(at, s["boot"]["stage_age_s"]) for at, s in starting
                      if s["boot"] and s["boot"]["stage"] != "waiting_for_gpu"]
    # The container's stages count from its start: one clock, never reset between stages.
    assert [age for _, age in container_ages] == sorted(age for _, age in container_ages)
    first_at, first_age = container_ages[0]
    last_at, last_age = container_ages[-1]
    assert abs((last_age - first_age) - (last_at - first_at)) <= 2
    assert seen[-1][1] == {"id": "slow-llama", "object": "model.status", "warm": True, "boot": None,
                           "activation_boot": None}

    response = answer["response"]
    assert response.status_code == 200, response.text
    assert response.json()["usage"]["completion_tokens"] == 2
    assert replicas() == {"RUNNING": 1}


def test_keep_warm_through_serve_holds_a_place_beside_the_apis_cap(slow_boot: tuple[str, str]) -> None:
    handle = serve.get_deployment_handle(DEPLOYMENT, APP)
    started = time.monotonic()
    assert handle.keep_warm.remote(0.5).result(timeout_s=30) is None
    assert 0.5 <= time.monotonic() - started < 10
    details = serve.context._get_global_client().get_serve_details()
    config = details["applications"][APP]["deployments"][DEPLOYMENT]["deployment_config"]
    assert config["max_ongoing_requests"] == 101
