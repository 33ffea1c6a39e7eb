"""Harvests end to end: the Serve app of the test profile (the tiny model),
its Runner replica, the GPU run as a Ray Data pipeline in its own detached
actor, files downloaded through signed links. The spec's two programs read
them unchanged; the numbers equal a Completion's capture and HF's."""
from __future__ import annotations

import ast
import os
import signal
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Iterator, cast

import httpx
import pytest
import torch
from safetensors.torch import load as load_safetensors
from sqlmodel import col, select

from deployments.catalog import load_catalog
from deployments.tensor_codec import decode
from ledger.tokens.tables import Hold
from ledger.work.tables import Work
from tests.hf_reference import reference
from tests.programs import run_program
from tests.serve_fixtures import ServeInstance, run_async

# Prompts of very different lengths in one harvest: each must get exactly its own rows.
MIXED = ["Hi", "The sky is", "Grass is green and the sky is blue, " * 6, "A", "One two three four five six seven"]


@pytest.fixture(scope="module")
def stack(serve_instance: ServeInstance) -> Iterator[tuple[str, str]]:
    with serve_instance.application("test", "harvests", "/harvests") as base:
        yield base, serve_instance.new_key("harvests")


@pytest.fixture(scope="module")
def hf_tiny() -> Any:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = load_catalog("test").models["tiny-llama"].weights_path()
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval(), AutoTokenizer.from_pretrained(path)


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def submit(stack: tuple[str, str], body: dict) -> dict:
    base, key = stack
    r = httpx.post(f"{base}/harvest", json={"model": "llama-8b", **body}, headers=auth(key), timeout=120)
    assert r.status_code == 202, r.text
    return r.json()


def wait(stack: tuple[str, str], job_id: str, check: Any, timeout_s: float = 300,
         long_poll_s: int = 5) -> httpx.Response:
    """Read the harvest until `check`; a read waits up to `long_poll_s` for its status to change
    (0 where the check is on a field that changes without a status, as `started_at`)."""
    base, key = stack
    deadline = time.monotonic() + timeout_s
    while True:
        r = httpx.get(f"{base}/harvest/{job_id}", params={"wait": long_poll_s}, headers=auth(key), timeout=30)
        assert r.status_code == 200, r.text
        if check(r.json()):
            return r
        assert time.monotonic() < deadline, r.json()
        time.sleep(0.2)


def done(job: dict) -> bool:
    assert job["status"] not in ("failed", "cancelled"), job
    return job["status"] == "done"


def shards(result: dict) -> dict[str, torch.Tensor]:
    """Every tensor of every shard, downloaded through its link (no API key)."""
    tensors: dict[str, torch.Tensor] = {}
    for url in result["shard_urls"]:
        r = httpx.get(url, timeout=120)
        assert r.status_code == 200, r.text
        tensors.update(load_safetensors(r.content))
    return tensors


def holds(serve_instance: ServeInstance, job_id: str) -> list[Any]:
    async def read() -> list[Any]:
        from ledger.store.db import make_engine, session_factory

        engine = make_engine(serve_instance.database_url)
        try:
            async with session_factory(engine)() as session:
                work = await session.get(Work, uuid.UUID(job_id))
                assert work is not None
                return list((await session.exec(select(Hold).where(col(Hold.request_id) == work.request_id)
                                                 .order_by(col(Hold.created_at)))).all())
        finally:
            await engine.dispose()
    return run_async(read())


def test_the_specs_programs_read_a_harvest(stack: tuple[str, str], tmp_path: Any) -> None:
    job = submit(stack, {"prompts": ["The sky is", "Grass is"], "layers": [2, 0]})
    assert (job["status"], job["layers"], job["reserved_tokens"]) == ("pending", [0, 2], 10 + 1 + 8 + 1)
    wait(stack, job["job_id"], done)
    os.chdir(tmp_path)  # the program writes its shards into the working folder
    env_base, key = stack
    os.environ["JOB_ID"] = job["job_id"]
    try:
        first, tokens = run_program("harvest_download", env_base, key).splitlines()
        dtype, shape = first.split(" ", 1)
        assert (dtype, ast.literal_eval(shape)) == ("torch.bfloat16", (2, 4, 64))
        assert ast.literal_eval(tokens) == [128000, 791, 13180, 374]
        layers, stats = run_program("harvest_manifest", env_base, key).splitlines()
        assert layers.startswith("[0, 2] ")
        assert stats == "torch.Size([2, 64]) torch.Size([2, 64])"
    finally:
        del os.environ["JOB_ID"]


def test_each_prompt_gets_its_own_rows_equal_to_a_capture_and_to_hf(stack: tuple[str, str], hf_tiny: Any) -> None:
    base, key = stack
    job = submit(stack, {"prompts": MIXED, "layers": [1, 3], "shard_size": 2})
    finished = wait(stack, job["job_id"], done).json()
    result = finished["result"]
    assert result["n_shards"] == 3 and result["layer_indices"] == [1, 3] and result["contents"] == "activations"
    tensors = shards(result)
    model, tokenizer = hf_tiny
    positions = 0
    for i, prompt in enumerate(MIXED):
        ids = tokenizer(prompt)["input_ids"]
        positions += len(ids)
        assert tensors[f"tokens_{i}"].tolist() == ids and tensors[f"tokens_{i}"].dtype == torch.int32
        rows = tensors[f"prompt_{i}"]
        assert rows.dtype == torch.bfloat16 and tuple(rows.shape) == (2, len(ids), 64)
        expected = torch.from_numpy(reference(model, ids, [1, 3])).to(torch.bfloat16).float()
        torch.testing.assert_close(rows.float(), expected, atol=2e-2, rtol=1 / 64)
        capture = httpx.post(f"{base}/completions", headers=auth(key), timeout=120, json={
            "model": "llama-8b", "prompt": ids, "max_tokens": 1, "temperature": 0,
            "output_residual_stream": [1, 3]}).json()
        captured = decode(capture["activations"]["residual_stream"], max_bytes=1 << 24)[:, :len(ids)]
        torch.testing.assert_close(rows.float(), torch.from_numpy(captured).to(torch.bfloat16).float())
    assert result["tokens"] == positions
    # Charged what the engine read, up to its Hold (the prompts' bytes, and a start token each).
    assert finished["tokens"] == positions < job["reserved_tokens"]


def test_four_thousand_short_prompts(stack: tuple[str, str]) -> None:
    prompts = [f"Prompt number {i}" for i in range(4096)]
    job = submit(stack, {"prompts": prompts, "layers": [0], "shard_size": 512})
    started = time.monotonic()
    finished = wait(stack, job["job_id"], done, timeout_s=900).json()
    seconds = time.monotonic() - started
    result = finished["result"]
    assert result["n_shards"] == 8 and len(result["shard_urls"]) == 8
    last = load_safetensors(httpx.get(result["shard_urls"][-1], timeout=120).content)
    assert sorted(last, key=lambda name: (name.split("_")[0], int(name.split("_")[1])))[0] == "prompt_3584"
    assert tuple(last["prompt_4095"].shape)[:1] == (1,)
    print(f"4096 prompts harvested in {seconds:.1f} s")


def runner_pid() -> int:
    from ray import serve

    return serve.get_deployment_handle("runner", app_name="harvests").owner.remote().result(timeout_s=60)["pid"]


def test_a_runner_killed_mid_run_is_followed_and_charges_once(stack: tuple[str, str],
                                                              serve_instance: ServeInstance) -> None:
    import ray

    # Long enough that the kill lands mid-run also on a loaded machine.
    prompts = [f"The sky is blue number {i}" for i in range(3000)]
    job = submit(stack, {"prompts": prompts, "layers": [0, 1, 2, 3], "shard_size": 64})
    wait(stack, job["job_id"], lambda j: j["started_at"] is not None, long_poll_s=0)
    run = ray.get_actor(f"harvest-{job['job_id']}", namespace="acs")
    pid = runner_pid()
    os.kill(pid, signal.SIGKILL)
    finished = wait(stack, job["job_id"], done, timeout_s=600).json()
    assert ray.get_actor(f"harvest-{job['job_id']}", namespace="acs")._actor_id == run._actor_id  # the same run
    spent = [(hold.state.value, hold.used) for hold in holds(serve_instance, job["job_id"])]
    assert spent == [("released", 0), ("settled", finished["tokens"])]
    assert finished["tokens"] == finished["result"]["tokens"]


def test_a_cancel_while_running_pays_the_hold_and_stops_the_run(stack: tuple[str, str],
                                                                serve_instance: ServeInstance) -> None:
    import ray

    base, key = stack
    # The most prompts a harvest takes, each of about 25 tokens: the torch engine ran 3,000 prompts of 4
    # tokens in a few seconds, which a cancel sent just after the start could miss.
    prompts = [f"Cancel me {i}: the history of the ancient city of Rome begins with a small settlement on the Tiber."
               for i in range(4096)]
    job = submit(stack, {"prompts": prompts, "layers": [0], "shard_size": 64})
    wait(stack, job["job_id"], lambda j: j["started_at"] is not None, long_poll_s=0)
    r = httpx.delete(f"{base}/harvest/{job['job_id']}", headers=auth(key), timeout=30)
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    assert r.json()["tokens"] == job["reserved_tokens"]
    deadline = time.monotonic() + 60
    while True:  # the GPU run stops, and its actor goes
        try:
            ray.get_actor(f"harvest-{job['job_id']}", namespace="acs")
        except ValueError:
            break
        assert time.monotonic() < deadline, "the run still runs"
        time.sleep(0.5)
    (hold,) = holds(serve_instance, job["job_id"])
    assert (hold.state.value, hold.used) == ("settled", job["reserved_tokens"])



def named_runs() -> list[str]:
    import ray

    # With all_namespaces, each is {"name", "namespace"} (its annotation says str).
    actors = cast(list[dict[str, str]], ray.util.list_named_actors(all_namespaces=True))
    return [actor["name"] for actor in actors if actor["namespace"] == "acs"]


def test_the_runners_housekeeping_ends_a_done_harvests_run(stack: tuple[str, str],
                                                           serve_instance: ServeInstance) -> None:
    from domain.harvests.closing import close_ended_runs
    from domain.harvests.handler import RayRuns
    from ledger.store.db import make_engine, session_factory

    job = submit(stack, {"prompts": ["The sky is"], "layers": [0]})
    wait(stack, job["job_id"], done)
    name = f"harvest-{job['job_id']}"
    assert name in named_runs()  # its final status stays after the result was written

    async def housekeeping() -> int:
        engine = make_engine(serve_instance.database_url)
        try:
            return await close_ended_runs(session_factory(engine), RayRuns(), datetime(2026, 1, 1, tzinfo=timezone.utc))
        finally:
            await engine.dispose()
    assert run_async(housekeeping()) >= 1
    deadline = time.monotonic() + 30
    while name in named_runs():  # the actor exits within seconds of its close
        assert time.monotonic() < deadline, "the run is still in the cluster"
        time.sleep(0.5)
    assert wait(stack, job["job_id"], done).json()["tokens"] == 4  # the result stays in the ledger
