"""Harvests through the real pipeline: the detached run actor, Ray Data, and the
model host with the catalog's harvest engine (the torch forward; the tiny model,
float32) on the session's local Ray. The shards read back with safetensors equal HF's
block outputs and a Completion's capture (vLLM + vllm-lens) within bfloat16 rounding,
each prompt with exactly its own rows; the vLLM harvest engine writes the same files;
a run of 4,096 prompts goes end to end."""
from __future__ import annotations

import functools
import json
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray
import torch
from safetensors.torch import load_file

from deployments.catalog import load_catalog
from deployments.engine import GenerateRequest, SamplingSpec
from deployments.tensor_codec import decode
from harvest.model_host import acquire_host, host_name, release_host
from harvest.run import CANCELLED, RunSpec, RunStatus, find_run, start_run, timed_out_message
from harvest.shards import MANIFEST_KEYS
from tests.fakes import FakeEngine
from tests.hf_reference import reference

MODEL = load_catalog("test").models["tiny-llama"]
LAYERS = [0, 2, 3]
BF16 = 2.0**-8  # bfloat16 keeps 8 significant bits: rounding moves a number by at most this share
LONG = "The history of the ancient city of Rome begins with a small settlement on the Tiber. " * 6
# Very different lengths in one batch; the long one prefills in chunks (max_num_batched_tokens 32).
MIXED = ["The sky is", "Grass", LONG, "Hi", "A cat sat on the mat and looked at the door.",
         "<|begin_of_text|>Text that already starts with the start token"]


@pytest.fixture(scope="module")
def storage_root(serve_instance: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The session's local Ray (tests/conftest.py), and a folder for the files."""
    yield str(tmp_path_factory.mktemp("harvests"))
    release_host(MODEL.id)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(MODEL.tokenizer_path())


def run_spec(storage_root: str, prompts: list[str], **fields: Any) -> RunSpec:
    values = dict(job_id=str(uuid.uuid4()), model=MODEL.model_dump(by_alias=True), prompts=prompts, layers=LAYERS,
                  shard_size=4, batch_size=None, add_special_tokens=True, directions=None,
                  storage_root=storage_root, time_limit_s=600, keep_status_s=120)
    return RunSpec(**{**values, **fields})


def wait_for(handle: Any, timeout_s: float = 600, seen: list[RunStatus] | None = None) -> RunStatus:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = ray.get(handle.status.remote())
        if seen is not None:
            seen.append(status)
        if status.state in ("done", "failed"):
            return status
        time.sleep(0.5)
    raise AssertionError(f"the run did not end within {timeout_s} s: {status}")


@pytest.fixture(scope="module")
def mixed(storage_root: str) -> tuple[RunSpec, RunStatus, Path]:
    spec = run_spec(storage_root, MIXED)
    status = wait_for(start_run(spec))
    assert status.state == "done", status.error
    return spec, status, Path(storage_root) / spec.job_id


def shards(folder: Path, n_shards: int) -> dict[str, torch.Tensor]:
    tensors: dict[str, torch.Tensor] = {}
    for index in range(n_shards):
        tensors.update(load_file(str(folder / f"shard_{index:05d}.safetensors")))
    return tensors


def test_each_prompt_gets_its_own_rows_equal_to_hf_within_bfloat16(mixed: Any, hf_model: Any,
                                                                   tokenizer: Any) -> None:
    spec, status, folder = mixed
    assert status.result["n_shards"] == 2 and status.prompts_done == status.n_prompts == len(MIXED)
    tensors = shards(folder, 2)
    assert len(tensors) == 2 * len(MIXED)
    for index, text in enumerate(MIXED):
        ids = tokenizer(text)["input_ids"]
        tokens, rows = tensors[f"tokens_{index}"], tensors[f"prompt_{index}"]
        assert tokens.dtype == torch.int32 and tokens.tolist() == ids
        assert rows.dtype == torch.bfloat16 and tuple(rows.shape) == (3, len(ids), 64)
        np.testing.assert_allclose(rows.float().numpy(), reference(hf_model, ids, LAYERS), rtol=BF16, atol=1e-4)
    # a text that starts with the start token gets two: the spec's "Avoid a second start token"
    assert tensors["tokens_5"].tolist()[:2] == [128000, 128000]
    assert status.result["tokens"] == status.result["tokens_read"] == sum(len(tokenizer(t)["input_ids"])
                                                                           for t in MIXED)


async def test_the_rows_equal_a_completions_capture_of_the_same_prompt(mixed: Any, tiny_engine: Any) -> None:
    _, _, folder = mixed
    tensors = shards(folder, 2)
    for index in (0, 2):
        ids = tensors[f"tokens_{index}"].tolist()
        spec = SamplingSpec(max_tokens=1, temperature=0.0, final_only=True, capture_layers=LAYERS)
        outputs = [out async for out in tiny_engine.generate(GenerateRequest(f"cap-{index}", ids, spec))]
        captured = decode(outputs[-1].activations["residual_stream"], max_bytes=1 << 24)
        assert captured.shape == (3, len(ids), 64)
        np.testing.assert_allclose(tensors[f"prompt_{index}"].float().numpy(), captured, rtol=BF16, atol=1e-6)


def test_the_statistics_and_the_manifest_describe_the_shards(mixed: Any) -> None:
    spec, status, folder = mixed
    tensors = shards(folder, 2)
    rows = np.concatenate([tensors[f"prompt_{i}"].float().numpy()[:, 1:] for i in range(len(MIXED))], axis=1)
    stats = load_file(str(folder / "stats.safetensors"))
    np.testing.assert_allclose(stats["mean"].numpy(), rows.astype(np.float64).mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(stats["std"].numpy(), rows.astype(np.float64).std(axis=1), rtol=1e-4, atol=1e-6)
    assert stats["layer_indices"].tolist() == LAYERS
    manifest = json.loads((folder / "manifest.json").read_text())
    assert [key for key in MANIFEST_KEYS if key not in manifest] == []
    assert manifest["run_id"] == spec.job_id and manifest["layout_version"] == 2
    assert manifest["model_id"] == MODEL.served_model_name and manifest["model_identity"].startswith("sha256:")
    assert all(manifest["runtime"][name] for name in ("vllm", "vllm_lens", "torch", "transformers"))
    assert manifest["runtime"]["engine"]["max_model_len"] == 2048
    assert manifest["runtime"]["engine"]["harvest_engine"] == MODEL.harvest_engine == "torch"
    assert manifest["prompts"] == MIXED and manifest["contents"] == "activations"
    assert [s["prompt_indices"] for s in manifest["shards"]] == [[0, 1, 2, 3], [4, 5]]
    assert manifest["shards"][0]["tensors"]["prompt_2"]["shape"] == list(tensors["prompt_2"].shape)
    norms = np.linalg.norm(rows.astype(np.float64), axis=2).mean(axis=1)
    np.testing.assert_allclose(manifest["mean_token_norm"], norms, rtol=1e-6)
    timings = status.result["timings"]
    assert sorted(timings) == ["forward_s", "load_s", "save_s", "upload_s"] and timings["forward_s"] > 0
    sizes = sum(p.stat().st_size for p in folder.iterdir())
    assert status.result["bytes_written"] == sizes and status.gpu_started_at is not None


def test_projections_onto_unit_directions_without_start_tokens(mixed: Any, storage_root: str, hf_model: Any,
                                                               tokenizer: Any) -> None:
    directions = np.random.default_rng(5).normal(size=(3, 64)).astype(np.float32) * [[4.0], [0.5], [1.0]]
    unit = directions / np.linalg.norm(directions, axis=1, keepdims=True)
    prompts = MIXED[:3]
    spec = run_spec(storage_root, prompts, directions=directions.astype(np.float32), add_special_tokens=False,
                    layers=[1, 3], shard_size=32)
    status = wait_for(start_run(spec))
    assert status.state == "done", status.error
    # the model host stayed loaded after the first harvest: this one loads nothing
    assert status.result["timings"]["load_s"] == 0
    assert status.result["contents"] == "projections"
    folder = Path(storage_root) / spec.job_id
    tensors = shards(folder, 1)
    for index, text in enumerate(prompts):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tensors[f"tokens_{index}"].tolist() == ids and ids[0] != 128000
        projected = tensors[f"prompt_{index}"]
        assert projected.dtype == torch.float32 and tuple(projected.shape) == (2, len(ids), 3)
        np.testing.assert_allclose(projected.numpy(), reference(hf_model, ids, [1, 3]) @ unit.T, rtol=1e-4, atol=1e-4)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["dtype"] == "float32" and manifest["projection"]["n_directions"] == 3
    assert manifest["add_special_tokens"] is False
    stats = load_file(str(folder / "stats.safetensors"))
    rows = np.concatenate([tensors[f"prompt_{i}"].numpy()[:, 1:] for i in range(3)], axis=1)
    assert tuple(stats["mean"].shape) == (2, 3)
    np.testing.assert_allclose(stats["mean"].numpy(), rows.mean(axis=1), rtol=1e-5, atol=1e-6)


def test_the_vllm_harvest_engine_writes_the_same_rows(mixed: Any, storage_root: str) -> None:
    """A model whose catalog says `harvest_engine: vllm` (one that needs several GPUs) reads through
    vllm-lens, a request per prompt: the same rows, within bfloat16 rounding."""
    _, _, torch_folder = mixed
    release_host(MODEL.id)  # the host is the model's, whatever its engine: the next one is vLLM's
    try:
        spec = run_spec(storage_root, MIXED, model=MODEL.model_copy(update={"harvest_engine": "vllm"})
                        .model_dump(by_alias=True))
        status = wait_for(start_run(spec))
        assert status.state == "done", status.error
        folder = Path(storage_root) / spec.job_id
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["runtime"]["engine"]["harvest_engine"] == "vllm"
        assert manifest["runtime"]["engine"]["max_num_seqs"] == 32
    finally:
        release_host(MODEL.id)  # the tests after this one get the catalog's engine again
    by_vllm, by_torch = shards(folder, 2), shards(torch_folder, 2)
    assert sorted(by_vllm) == sorted(by_torch)
    for name, rows in by_torch.items():
        assert by_vllm[name].dtype == rows.dtype
        np.testing.assert_allclose(by_vllm[name].float().numpy(), rows.float().numpy(), rtol=2 * BF16, atol=1e-4)


def test_a_second_start_changes_nothing(mixed: Any, storage_root: str) -> None:
    spec = run_spec(storage_root, ["one", "two"])
    first = start_run(spec)
    again = start_run(run_spec(storage_root, ["other"] * 5, job_id=spec.job_id))
    assert find_run(spec.job_id) is not None
    status = wait_for(again)
    assert status.state == "done" and status.n_prompts == 2 and status.result["n_shards"] == 1
    assert ray.get(first.status.remote()) == status


def test_a_run_past_its_time_limit_fails_saying_it_timed_out(mixed: Any, storage_root: str) -> None:
    # Far more work than 2 s holds: the torch engine read 300 of these prompts, pipeline start included,
    # within 2 s (the 2-core machine, 2026-12-05), so the run must not be able to end before its limit on any machine.
    spec = run_spec(storage_root, MIXED * 2000, time_limit_s=2)
    status = wait_for(start_run(spec), timeout_s=120)
    assert (status.state, status.error, status.result) == ("failed", timed_out_message(2), None)
    assert status.error == "The harvest timed out: its GPU run did not end within its time limit of 2 seconds."
    folder = Path(storage_root) / spec.job_id
    deadline = time.monotonic() + 60
    while folder.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not folder.exists()


def test_a_cancel_stops_the_run_and_the_actor_exits(mixed: Any, storage_root: str) -> None:
    # Far more than the test's polls can miss: 4,096 short prompts run end to end in about 6 s here.
    spec = run_spec(storage_root, [f"Prompt {i} of many" for i in range(20000)], shard_size=32)
    handle = start_run(spec)
    deadline = time.monotonic() + 120
    while (status := ray.get(handle.status.remote())).prompts_done == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert status.gpu_started_at is not None and status.state == "running"
    ray.get(handle.cancel.remote())
    cancelled = ray.get(handle.status.remote())
    assert (cancelled.state, cancelled.error) == ("failed", CANCELLED)
    assert cancelled.prompts_done < 20000 and cancelled.gpu_started_at == status.gpu_started_at
    deadline = time.monotonic() + 60
    while (find_run(spec.job_id) is not None or (Path(storage_root) / spec.job_id).exists()) \
            and time.monotonic() < deadline:
        time.sleep(0.5)
    assert find_run(spec.job_id) is None and not (Path(storage_root) / spec.job_id).exists()


def test_an_idle_host_exits_by_itself_and_the_next_harvest_measures_its_load(serve_instance: Any) -> None:
    model = {**MODEL.model_dump(by_alias=True), "id": "tiny-llama-idle"}
    factory = functools.partial(FakeEngine)
    _, info, load_s = acquire_host(model, factory, idle_s=60)
    assert load_s > 0 and info.model_identity.startswith("sha256:")
    _, again, warm_load_s = acquire_host(model, factory, idle_s=60)
    assert warm_load_s == 0 and again.ready_at == info.ready_at
    assert release_host("tiny-llama-idle")
    _, _, cold_load_s = acquire_host(model, factory, idle_s=1.0)  # a new host, which idles out at once
    assert cold_load_s > 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            ray.get_actor(host_name("tiny-llama-idle"), namespace="acs")
        except ValueError:
            break
        time.sleep(0.5)
    else:
        raise AssertionError("the idle host is still there")


def test_4096_short_prompts_end_to_end(mixed: Any, storage_root: str, hf_model: Any) -> None:
    """The issue's run: 4,096 prompts on the tiny model (its host warm from the harvests above)."""
    prompts = [f"Prompt number {i} is short" + " and sweet" * (i % 3) for i in range(4096)]
    spec = run_spec(storage_root, prompts, layers=[1, 3], shard_size=32)
    seen: list[RunStatus] = []
    started = time.monotonic()
    status = wait_for(start_run(spec), timeout_s=900, seen=seen)
    elapsed = time.monotonic() - started
    assert status.state == "done", status.error
    result = status.result
    print(f"\n4,096 prompts end to end: {elapsed:.1f} s; timings {result['timings']}; {result['tokens']} tokens")
    assert result["n_shards"] == 128 and status.prompts_done == 4096
    progress = [s.prompts_done for s in seen]
    assert progress == sorted(progress) and any(0 < p < 4096 for p in progress)
    folder = Path(storage_root) / spec.job_id
    assert len(list(folder.glob("shard_*.safetensors"))) == 128 and (folder / "manifest.json").exists()
    last = load_file(str(folder / "shard_00127.safetensors"))
    assert sorted(last) == sorted(f"{kind}_{i}" for kind in ("prompt", "tokens") for i in range(4064, 4096))
    ids = last["tokens_4095"].tolist()
    np.testing.assert_allclose(last["prompt_4095"].float().numpy(), reference(hf_model, ids, [1, 3]),
                               rtol=BF16, atol=1e-4)
