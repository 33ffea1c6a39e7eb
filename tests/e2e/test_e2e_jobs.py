"""Jobs end to end: the Serve application of the test profile (ingress, the
tiny model's real engine, and the Runner in a replica process of its own),
PostgreSQL, curl, jq and the cookbook's job.sh as it is. The Runner is killed
with SIGKILL while a Job runs, and after a Job has its answer."""
from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from ledger.work.tables import Work
from tests.programs import program_file
from tests.serve_fixtures import ServeInstance, holds, kill_runner


@pytest.fixture(scope="module")
def stack(serve_instance: ServeInstance) -> Iterator[tuple[str, str]]:
    with serve_instance.application("test", "jobs", "/jobs") as base:
        yield base, serve_instance.new_key("jobs")


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def submit(stack: tuple[str, str], body: dict, idempotency_key: str | None = None) -> dict:
    base, key = stack
    headers = {**auth(key), **({"Idempotency-Key": idempotency_key} if idempotency_key else {})}
    r = httpx.post(f"{base}/completion-jobs", json=body, headers=headers, timeout=60)
    assert r.status_code in (200, 202), r.text
    return r.json()


def wait(stack: tuple[str, str], job_id: str, *statuses: str, timeout_s: float = 120) -> dict:
    base, key = stack
    deadline = time.monotonic() + timeout_s
    while True:
        job = httpx.get(f"{base}/completion-jobs/{job_id}", headers=auth(key), timeout=30).json()
        if job["status"] in statuses:
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.1)


def work_row(serve_instance: ServeInstance, job_id: str) -> Any:
    async def read(session: Any) -> Any:
        return await session.get(Work, uuid.UUID(job_id))
    return serve_instance.read_ledger(read)


def test_the_cookbooks_job_script_runs_as_it_is(stack: tuple[str, str], serve_instance: ServeInstance,
                                                tmp_path: Path) -> None:
    base, key = stack
    env = {**os.environ, "ACS_API_BASE": base, "ACS_API_KEY": key}
    runs = [subprocess.run(["sh", str(program_file("job.sh")), "sky-001"], env=env, capture_output=True, text=True,
                           timeout=300, cwd=tmp_path) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    first, again = (json.loads(run.stdout) for run in runs)
    assert first["usage"] == {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}
    assert again == first  # the same key: the same Job and its answer, run once
    job_id = runs[0].stderr.split()[2]
    assert f"Job {job_id} is succeeded" in runs[1].stderr
    assert len(holds(serve_instance, "req_job_" + job_id.replace("-", ""))) == 1


def test_activations_in_a_job_with_curl_and_jq(stack: tuple[str, str]) -> None:
    base, key = stack
    job = submit(stack, {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2,
                         "output_residual_stream": [0, 2]}, "sky-layers-001")
    wait(stack, job["id"], "succeeded")
    command = (f'curl -sS "$ACS_API_BASE/completion-jobs/{job["id"]}/result" -H "Authorization: Bearer $ACS_API_KEY" '
               "| jq -c '.activations.residual_stream.shape'")
    out = subprocess.run(["bash", "-c", command], env={**os.environ, "ACS_API_BASE": base, "ACS_API_KEY": key},
                         capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[2,5,64]"


def test_steering_vectors_in_a_job(stack: tuple[str, str]) -> None:
    import numpy as np

    from deployments.tensor_codec import decode

    base, key = stack
    vector = np.zeros(64)
    vector[:3] = [1, 2, 3]

    def layer_1(scale: float) -> np.ndarray:
        job = submit(stack, {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 1, "temperature": 0,
                             "output_residual_stream": [1], "apply_steering_vectors": [
                                 {"activations": [vector.tolist()], "layer_indices": [1], "scale": scale}]})
        wait(stack, job["id"], "succeeded")
        result = httpx.get(f"{base}/completion-jobs/{job['id']}/result", headers=auth(key), timeout=30).json()
        return decode(result["activations"]["residual_stream"], max_bytes=1 << 24)[0]

    baseline, steered = layer_1(0.0), layer_1(2.0)
    np.testing.assert_allclose(steered - baseline, np.broadcast_to(2 * vector, baseline.shape), atol=1e-5)


def test_cancel_a_long_job_while_it_runs(stack: tuple[str, str], serve_instance: ServeInstance) -> None:
    base, key = stack
    job = submit(stack, {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2000}, "sky-long-001")
    wait(stack, job["id"], "running")
    while not holds(serve_instance, job["request_id"]):
        time.sleep(0.05)
    cancelled = httpx.post(f"{base}/completion-jobs/{job['id']}/cancel", headers=auth(key), timeout=30).json()
    assert (cancelled["status"], cancelled["cancel_requested"]) == ("cancelled", True)
    (hold,) = holds(serve_instance, job["request_id"])
    assert (hold.state.value, hold.used, hold.counting.value) == ("settled", 2004, "held")
    r = httpx.get(f"{base}/completion-jobs/{job['id']}/result", headers=auth(key), timeout=30)
    assert (r.status_code, r.json()["error"]["code"]) == (409, "job_cancelled")


def test_sigkill_of_the_runner_while_a_job_runs(stack: tuple[str, str], serve_instance: ServeInstance) -> None:
    job = submit(stack, {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 1500, "temperature": 0})
    wait(stack, job["id"], "running")
    while not holds(serve_instance, job["request_id"]):
        time.sleep(0.05)
    kill_runner("jobs")
    done = wait(stack, job["id"], "succeeded", timeout_s=300)
    assert done["usage_pending"] is False
    spent = sorted((h.state.value, h.used) for h in holds(serve_instance, job["request_id"]))
    assert spent == [("released", 0), ("settled", 1504)]  # the cut attempt cost nothing: charged once
    assert work_row(serve_instance, job["id"]).attempts == 2


def test_sigkill_after_the_answer_is_stored(stack: tuple[str, str], serve_instance: ServeInstance) -> None:
    base, key = stack
    job = submit(stack, {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2})
    wait(stack, job["id"], "succeeded")
    answer = httpx.get(f"{base}/completion-jobs/{job['id']}/result", headers=auth(key), timeout=30).json()
    kill_runner("jobs")
    time.sleep(float(os.environ.get("ACS_RUNNER_LEASE_S", "4")) + 1)
    again = httpx.get(f"{base}/completion-jobs/{job['id']}/result", headers=auth(key), timeout=30).json()
    assert again == answer
    assert work_row(serve_instance, job["id"]).attempts == 1
    assert len(holds(serve_instance, job["request_id"])) == 1
