"""A harvest's files, written from FakeEngine rows without Ray: shards read back
with safetensors, the statistics against NumPy, the manifest's keys, the
bfloat16 rounding, and a writer that holds a prompt at a time, not a shard."""
from __future__ import annotations

import asyncio
import contextlib
import json
import tracemalloc
import uuid
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
import torch
from safetensors.torch import load, load_file

from deployments.engine import EngineRefused, ForwardRequest
from harvest.pipeline import forward_chunks
from harvest.run import duration_words, failure_message, timed_out_message
from harvest.shards import (
    LAYOUT_VERSION,
    MANIFEST_KEYS,
    HarvestedPrompt,
    HarvestWriter,
    OutOfOrder,
    build_manifest,
    packed_values,
    to_bfloat16_bits,
    unit_directions,
)
from harvest.storage import HarvestStorage
from tests.fakes import FakeEngine

LAYERS = [0, 2, 3]
# Mixed lengths, one prompt of a single token (it adds nothing to the statistics).
PROMPTS = [[1, 5, 6, 7], [1, 9], [1] + list(range(20, 60)), [1, 3, 3, 3, 3], [42], [1, 8, 8]]


class RecordingStorage(HarvestStorage):
    """Storage that remembers the order in which files were written."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.order: list[str] = []

    @contextlib.contextmanager
    def writer(self, job_id: Any, name: str) -> Iterator[Any]:
        with super().writer(job_id, name) as out:
            yield out
        self.order.append(name)


def fake_rows(prompts: list[list[int]], layers: list[int], directions: Any = None) -> list[Any]:
    return asyncio.run(FakeEngine().forward(ForwardRequest("unit", prompts, layers, directions)))


def write_harvest(tmp_path: Path, prompts: list[list[int]], shard_size: int, directions: Any = None,
                  storage: HarvestStorage | None = None) -> tuple[HarvestStorage, str, dict[str, Any], HarvestWriter]:
    storage = storage or RecordingStorage(str(tmp_path / "store"))
    job_id = str(uuid.uuid4())
    projecting = directions is not None
    width = directions.shape[0] if projecting else 64
    writer = HarvestWriter(storage, job_id, n_prompts=len(prompts), shard_size=shard_size, layer_indices=LAYERS,
                           width=width, spool_dir=str(tmp_path))
    for index, got in enumerate(fake_rows(prompts, LAYERS, directions)):
        writer.add(HarvestedPrompt(index, np.asarray(got.token_ids, np.int32), packed_values(got.rows, projecting)))
    _, projection = unit_directions(directions) if projecting else (None, None)
    manifest = writer.finish(build_manifest(
        run_id=job_id, model_id="acs/tiny-llama-random", model_identity="sha256:test", runtime={"vllm": "x"},
        projecting=projecting, add_special_tokens=True, layer_indices=LAYERS,
        prompts=[f"text {i}" for i in range(len(prompts))], batch_size=None, projection=projection))
    return storage, job_id, manifest, writer


def folder(storage: HarvestStorage, job_id: str) -> Path:
    return Path(storage.root) / job_id


def all_tensors(storage: HarvestStorage, job_id: str, n_shards: int) -> dict[str, torch.Tensor]:
    tensors: dict[str, torch.Tensor] = {}
    for shard in range(n_shards):
        tensors.update(load_file(str(folder(storage, job_id) / f"shard_{shard:05d}.safetensors")))
    return tensors


def test_each_shard_holds_its_prompts_in_order_as_bfloat16(tmp_path: Path) -> None:
    storage, job_id, manifest, _ = write_harvest(tmp_path, PROMPTS, shard_size=4)
    assert sorted(p.name for p in folder(storage, job_id).iterdir()) == [
        "manifest.json", "shard_00000.safetensors", "shard_00001.safetensors", "stats.safetensors"]
    first = load_file(str(folder(storage, job_id) / "shard_00000.safetensors"))
    assert sorted(first) == sorted([f"prompt_{i}" for i in range(4)] + [f"tokens_{i}" for i in range(4)])
    tensors = all_tensors(storage, job_id, 2)
    for index, (ids, got) in enumerate(zip(PROMPTS, fake_rows(PROMPTS, LAYERS))):
        prompt, tokens = tensors[f"prompt_{index}"], tensors[f"tokens_{index}"]
        assert prompt.dtype == torch.bfloat16 and tuple(prompt.shape) == (3, len(ids), 64)
        assert tokens.dtype == torch.int32 and tokens.tolist() == ids
        # exactly torch's rounding of the prompt's own rows: no padding, no neighbour's rows
        assert torch.equal(prompt, torch.from_numpy(got.rows).to(torch.bfloat16))
    assert [s["prompt_indices"] for s in manifest["shards"]] == [[0, 1, 2, 3], [4, 5]]


def test_the_statistics_are_numpys_over_all_but_each_first_position(tmp_path: Path) -> None:
    storage, job_id, manifest, _ = write_harvest(tmp_path, PROMPTS, shard_size=4)
    tensors = all_tensors(storage, job_id, 2)
    # over the files' own numbers (bfloat16 read back), position 0 of each prompt left out
    rows = np.concatenate([tensors[f"prompt_{i}"].float().numpy()[:, 1:, :] for i in range(len(PROMPTS))], axis=1)
    stats = load_file(str(folder(storage, job_id) / "stats.safetensors"))
    assert sorted(stats) == ["layer_indices", "mean", "std"]
    assert stats["mean"].dtype == stats["std"].dtype == torch.float32 and tuple(stats["mean"].shape) == (3, 64)
    assert stats["layer_indices"].tolist() == LAYERS
    np.testing.assert_allclose(stats["mean"].numpy(), rows.astype(np.float64).mean(axis=1), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(stats["std"].numpy(), rows.astype(np.float64).std(axis=1), rtol=1e-4, atol=1e-7)
    norms = np.linalg.norm(rows.astype(np.float64), axis=2).mean(axis=1)
    np.testing.assert_allclose(manifest["mean_token_norm"], norms, rtol=1e-9)
    assert manifest["stats_count"] == sum(len(p) - 1 for p in PROMPTS)
    # the first positions are outliers here on purpose: counted, they would move the mean
    with_first = np.concatenate([tensors[f"prompt_{i}"].float().numpy() for i in range(len(PROMPTS))], axis=1)
    assert not np.allclose(stats["mean"].numpy(), with_first.mean(axis=1), rtol=1e-6, atol=1e-7)


def test_statistics_of_single_token_prompts_only_are_nan(tmp_path: Path) -> None:
    storage, job_id, manifest, _ = write_harvest(tmp_path, [[5], [6]], shard_size=32)
    stats = load_file(str(folder(storage, job_id) / "stats.safetensors"))
    assert torch.isnan(stats["mean"]).all() and torch.isnan(stats["std"]).all()
    assert manifest["mean_token_norm"] == [None, None, None]


def test_the_manifest_has_every_key_of_the_spec_and_is_written_last(tmp_path: Path) -> None:
    storage, job_id, manifest, writer = write_harvest(tmp_path, PROMPTS, shard_size=4)
    on_disk = json.loads((folder(storage, job_id) / "manifest.json").read_text())
    assert on_disk == manifest
    assert [key for key in MANIFEST_KEYS if key not in on_disk] == []
    assert on_disk["layout_version"] == LAYOUT_VERSION == 2
    assert on_disk["run_id"] == job_id and on_disk["dtype"] == "bfloat16" and on_disk["contents"] == "activations"
    assert on_disk["layer_indices"] == LAYERS and on_disk["prompts"] == [f"text {i}" for i in range(6)]
    assert "block k" in on_disk["residual_stream_convention"] and "projection" not in on_disk
    assert len(on_disk["mean_token_norm"]) == 3
    shard = on_disk["shards"][1]
    assert shard["file"] == "shard_00001.safetensors"
    assert shard["tensors"]["prompt_4"] == {"dtype": "bfloat16", "shape": [3, 1, 64]}
    assert shard["tensors"]["tokens_5"] == {"dtype": "int32", "shape": [3]}
    assert storage.order == ["shard_00000.safetensors", "shard_00001.safetensors", "stats.safetensors",
                             "manifest.json"]
    sizes = sum(p.stat().st_size for p in folder(storage, job_id).iterdir())
    assert writer.totals.bytes_written == sizes and writer.totals.n_shards == 2
    assert writer.totals.tokens == sum(map(len, PROMPTS)) == on_disk["tokens"]


def test_projections_are_float32_onto_unit_directions(tmp_path: Path) -> None:
    generator = np.random.default_rng(3)
    directions = (generator.normal(size=(5, 64)) * [[1], [2], [3], [0.5], [10]]).astype(np.float32)
    unit, projection = unit_directions(directions)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, rtol=1e-6)
    assert projection["n_directions"] == 5 and projection["hidden_size"] == 64
    storage, job_id, manifest, _ = write_harvest(tmp_path, PROMPTS, shard_size=6, directions=unit)
    tensors = all_tensors(storage, job_id, 1)
    plain = fake_rows(PROMPTS, LAYERS)
    for index, got in enumerate(plain):
        prompt = tensors[f"prompt_{index}"]
        assert prompt.dtype == torch.float32 and tuple(prompt.shape) == (3, len(PROMPTS[index]), 5)
        np.testing.assert_allclose(prompt.numpy(), got.rows @ unit.T, rtol=1e-5, atol=1e-5)
    assert manifest["contents"] == "projections" and manifest["dtype"] == "float32"
    assert manifest["projection"]["scaled_to_unit_length"] is True
    stats = load((folder(storage, job_id) / "stats.safetensors").read_bytes())
    assert tuple(stats["mean"].shape) == (3, 5)


def test_bfloat16_rounding_is_torchs() -> None:
    generator = np.random.default_rng(0)
    values = np.concatenate([
        generator.normal(size=10_000).astype(np.float32) * 50,
        # ties: exactly halfway between two bfloat16 numbers rounds to the even one
        (np.arange(1, 200, dtype=np.uint32) << 16 | 0x8000).view(np.float32),
        np.array([0.0, -0.0, np.inf, -np.inf, 3.4e38, -3.4e38, 1e-40, -1e-40], np.float32),
    ])
    ours = to_bfloat16_bits(values)
    theirs = torch.from_numpy(values).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(ours, theirs)
    assert np.isnan(torch.from_numpy(to_bfloat16_bits(np.array([np.nan], np.float32)).view(np.int16))
                    .view(torch.bfloat16).float().numpy()).all()


def test_a_prompt_out_of_order_is_refused(tmp_path: Path) -> None:
    writer = HarvestWriter(HarvestStorage(str(tmp_path)), str(uuid.uuid4()), n_prompts=2, shard_size=2,
                           layer_indices=[0], width=4)
    with pytest.raises(OutOfOrder):
        writer.add(HarvestedPrompt(1, np.array([1], np.int32), np.zeros((1, 1, 4), np.uint16)))
    with pytest.raises(ValueError):
        writer.add(HarvestedPrompt(0, np.array([1, 2], np.int32), np.zeros((1, 1, 4), np.uint16)))
    writer.discard()


def test_many_prompts_are_written_holding_a_prompt_not_a_shard(tmp_path: Path) -> None:
    """1,200 prompts of 200 tokens at 3 Layers, 300 to a shard: a shard's rows are 23 MB,
    the harvest's 92 MB; the writer's own allocations (a copy buffer, and the names and
    shapes that the manifest lists) stay under a quarter of a shard."""
    n, tokens, width, shard_size = 1200, 200, 64, 300
    shard_bytes = shard_size * len(LAYERS) * tokens * width * 2
    storage = HarvestStorage(str(tmp_path / "store"))
    writer = HarvestWriter(storage, str(uuid.uuid4()), n_prompts=n, shard_size=shard_size, layer_indices=LAYERS,
                           width=width, spool_dir=str(tmp_path))
    rows = fake_rows([[1] + list(range(100, 100 + tokens - 1))], LAYERS)[0]
    packed = packed_values(rows.rows, False)
    ids = np.asarray(rows.token_ids, np.int32)
    tracemalloc.start()
    try:
        for index in range(n):
            # a fresh copy each time, as the pipeline hands over: the writer must let it go
            writer.add(HarvestedPrompt(index, ids.copy(), packed.copy()))
        _, peak = tracemalloc.get_traced_memory()
        top = tracemalloc.take_snapshot().statistics("lineno")[:5]
    finally:
        tracemalloc.stop()
    assert writer.totals.n_shards == 4
    assert peak < shard_bytes / 4, f"peak {peak:,} bytes for shards of {shard_bytes:,}: {top}"
    files = sorted(p.name for p in (Path(storage.root) / writer.job_id).iterdir())
    assert files == [f"shard_{i:05d}.safetensors" for i in range(4)]
    last = load_file(str(Path(storage.root) / writer.job_id / "shard_00003.safetensors"))
    assert len(last) == 2 * shard_size and torch.equal(last["prompt_1199"], torch.from_numpy(rows.rows).bfloat16())


def test_forward_chunks_keep_a_call_under_its_byte_budget() -> None:
    assert [(s.start, s.stop) for s in forward_chunks([10, 10, 10, 50, 1], 4, 80)] == [(0, 2), (2, 3), (3, 4), (4, 5)]
    assert [(s.start, s.stop) for s in forward_chunks([3, 3], 4, 1 << 20)] == [(0, 2)]


def test_the_run_says_why_it_failed() -> None:
    assert duration_words(3600) == "60 minutes" and duration_words(9000) == "150 minutes"
    assert duration_words(2.5) == "2.5 seconds"
    assert timed_out_message(3600) == ("The harvest timed out: its GPU run did not end within its time limit "
                                       "of 60 minutes.")
    refused = EngineRefused("project_onto has directions of 3 numbers, but the model's hidden size is 64.")
    wrapped = RuntimeError("stage failed")
    wrapped.__cause__ = refused
    assert failure_message(wrapped) == refused.message
    assert failure_message(ValueError("boom")) == "The harvest failed in Inference: ValueError: boom"
    traced = RuntimeError('creation task failed\n  File "x.py", line 1\nValue error, too many\n'
                          "  For further information visit x")
    assert failure_message(traced) == "The harvest failed in Inference: RuntimeError: Value error, too many"


def test_the_harvest_host_batches_more_sequences_than_vllm_will_refuse() -> None:
    from deployments.catalog import load_catalog
    from harvest.model_host import HARVEST_MAX_NUM_SEQS, harvest_engine_args

    smollm = load_catalog("embedded").models["smollm2-135m"]
    assert smollm.vllm_args()["max_num_seqs"] == 16 and harvest_engine_args(smollm)["max_num_seqs"] == 64
    tiny = load_catalog("test").models["tiny-llama"]  # 32 tokens a step: no more than 32 sequences
    assert harvest_engine_args(tiny)["max_num_seqs"] == 32 < HARVEST_MAX_NUM_SEQS
    assert {k: v for k, v in harvest_engine_args(tiny).items() if k != "max_num_seqs"} == {
        k: v for k, v in tiny.vllm_args().items() if k != "max_num_seqs"}
