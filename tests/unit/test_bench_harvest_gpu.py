"""bench/harvest_gpu.py (issue 39) on the CPU with a tiny Llama, so that its one run on a lent GPU
works the first time: it runs with only the packages that machine has, its shards hold every prompt's
own rows in harvest/shards.py's format, its check fails rows that are not the prompt's, and its FLOP
count is Llama 3.1 8B's."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from bench import harvest_gpu as bench
from bench.harvest_gpu_check import as_float32, check_prompts
from bench.harvest_gpu_sink import rows_as_numpy, safetensors_header, shard_name
from cluster import build_models
from deployments.engine import ForwardRequest
from domain.harvests.validation import DEFAULT_SHARD_SIZE
from harvest import shards, storage
from harvest.torch_forward import TorchForward

REPO_ROOT = Path(__file__).resolve().parents[2]
# What the project installs and the lent GPU machine lacks (bench/README.md), and the project's own
# packages above harvest/ and deployments/: the bench must run with none of them.
NOT_ON_THE_GPU_MACHINE = ("vllm", "vllm_lens", "ray", "fastapi", "starlette", "uvicorn", "pydantic",
                          "pydantic_settings", "sqlmodel", "sqlalchemy", "asyncpg", "redis", "aiosqlite", "alembic",
                          "zstandard", "gguf", "openai", "argon2", "authlib", "api", "ledger", "domain", "cluster")
# A module set to None in sys.modules is one Python cannot import and importlib.util.find_spec finds
# absent, as on a machine without it.
WITHOUT = ("import runpy, sys\nfor name in sys.argv[1].split(','):\n    sys.modules[name] = None\n"
           "sys.argv = sys.argv[2:]\nrunpy.run_path(sys.argv[0], run_name='__main__')")
PROMPTS, SHARD_SIZE, MAX_TOKENS = 24, 5, 80


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("config") / "config.json"
    path.write_text(json.dumps({**build_models.TINY_CONFIG, "model_type": "llama"}))
    return path


def tiny_args(config: Path, *more: str) -> list[str]:
    return ["--config", str(config), "--device", "cpu", "--prompts", str(PROMPTS), "--max-tokens", str(MAX_TOKENS),
            "--window", "10", "--token-budget", "256", "--shard-size", str(SHARD_SIZE), "--check", "3", *more]


@pytest.fixture(scope="module")
def gpu_machine_run(tiny_config: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, str]:
    folder = tmp_path_factory.mktemp("run")
    argv = tiny_args(tiny_config, "--out", str(folder / "shards"), "--keep-shards", "--json", str(folder / "run.json"))
    done = subprocess.run([sys.executable, "-c", WITHOUT, ",".join(NOT_ON_THE_GPU_MACHINE),
                           str(REPO_ROOT / "bench" / "harvest_gpu.py"), *argv],
                          capture_output=True, text=True, timeout=120, cwd="/")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((folder / "run.json").read_text()), folder / "shards", done.stdout


def test_it_runs_without_the_packages_the_gpu_machine_lacks_and_prints_its_figures(
        gpu_machine_run: tuple[dict, Path, str]) -> None:
    results, _, printed = gpu_machine_run
    assert results["prompts_run"] == PROMPTS and not results["stopped_early"]
    assert results["tokens_per_s"] > 0 and results["tokens_per_s_end_to_end"] > 0 and 0 < results["mfu"] < 1
    assert results["writes"]["shards"] == math.ceil(PROMPTS / SHARD_SIZE)
    assert results["writes"]["disk_bytes_per_s"] > 0 and results["memory"]["host_peak_rss"] > 0
    check = results["check"]
    assert check["passed"] and check["read_back_equal"] and len(check["prompts"]) == 3
    for figure in ("tokens/s:", "MFU:", "writes:", "memory:", "PASS"):
        assert figure in printed


def test_the_shards_hold_every_prompt_once_with_the_engines_rows(gpu_machine_run: tuple[dict, Path, str],
                                                                 tiny_config: Path) -> None:
    results, folder, _ = gpu_machine_run
    args = bench.parse_args(tiny_args(tiny_config))
    config = bench.load_config(tiny_config, None)
    engine = TorchForward(bench.build_model(config, "cpu", torch.bfloat16, args.seed), model_id="tiny",
                          max_model_len=MAX_TOKENS + 1)
    lengths, seen = bench.prompt_lengths(args), []
    for index in range(results["writes"]["shards"]):
        tensors = load_file(folder / shard_name(index))
        names = sorted(int(name.split("_")[1]) for name in tensors if name.startswith("prompt_"))
        assert len(names) == (SHARD_SIZE if index < PROMPTS // SHARD_SIZE else PROMPTS % SHARD_SIZE)
        for i in names:
            window, offset = divmod(i, args.window)
            tokens = bench.window_tokens(args.seed, window, lengths[window * args.window:][:args.window],
                                         config.vocab_size)[offset]
            assert np.array_equal(tensors[f"tokens_{i}"].numpy(), tokens)
            rows = tensors[f"prompt_{i}"]
            assert rows.dtype == torch.bfloat16 and tuple(rows.shape) == (3, len(tokens), 64)
            (alone,) = engine.forward_now(ForwardRequest("alone", [tokens.tolist()], results["layers"]))
            # The same prompt in a batch of others and alone: the same up to bfloat16 rounding.
            got, expected = as_float32(rows_as_numpy(rows)), as_float32(alone.rows)
            assert np.abs(got - expected).max() <= 2.0**-7 * np.abs(expected).max()
        seen += names
    assert sorted(seen) == list(range(PROMPTS))


def test_a_run_past_its_time_limit_stops_after_its_first_call_and_says_so(tiny_config: Path, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # Layers 0 and 1 of 4: the pass and the float32 reference stop at block 1.
    argv = tiny_args(tiny_config, "--seconds-limit", "0", "--layers", "0", "1", "--json", str(tmp_path / "r.json"))
    assert bench.main(argv) == 0
    results = json.loads((tmp_path / "r.json").read_text())
    assert results["stopped_early"] and results["calls"] == 1 and 0 < results["prompts_run"] < PROMPTS
    assert results["check"]["passed"] and results["model"]["block_weights_run"] == 2 * 36_864
    assert "STOPPED EARLY" in capsys.readouterr().out


def test_the_check_fails_rows_of_another_prompt_or_shifted_by_a_token(tiny_config: Path) -> None:
    model = bench.build_model(bench.load_config(tiny_config, None), "cpu", torch.bfloat16, 0)
    engine = TorchForward(model, model_id="tiny", max_model_len=64)
    rng = np.random.default_rng(5)
    first, second = (rng.integers(0, 128256, 40, dtype=np.int32) for _ in range(2))
    rows = [r.rows for r in engine.forward_now(ForwardRequest("r", [first.tolist(), second.tolist()], [1, 3]))]
    assert check_prompts(model, [1, 3], {0: (first, rows[0]), 1: (second, rows[1])})["passed"]
    swapped = check_prompts(model, [1, 3], {0: (first, rows[1])})
    shifted = check_prompts(model, [1, 3], {0: (first[1:], rows[0][:, :-1])})
    assert not swapped["passed"] and not shifted["passed"]
    assert min(swapped["norm_relative"]) > 1 and min(shifted["norm_relative"]) > 1


def test_the_flops_are_llama_3_1_8bs() -> None:
    """8,030,261,248 parameters (Meta's count for Llama 3.1 8B), 218,103,808 matmul weights a block."""
    config = bench.load_config(bench.TRACKED_CONFIG, None)
    with torch.device("meta"):
        from transformers import AutoModel

        flops = bench.FlopModel.of(AutoModel.from_config(config))
    assert flops.all_parameters == 8_030_261_248 and flops.block_weights == [218_103_808] * 32
    lengths = np.array([1, 3])
    assert flops.attention(lengths) == 4 * 32 * 128 * (1 + 6)
    assert flops.work(lengths, 15) == 2 * 16 * 218_103_808 * 4 + 16 * flops.attention(lengths)
    assert bench.default_layers(32) == [8, 16, 31] and bench.default_layers(2) == [0, 1]


def test_the_tracked_8b_config_is_build_models_recipe() -> None:
    """bench/llama-8b-config.json travels to the GPU machine, where models/ (git-ignored) does not."""
    tracked = json.loads(bench.TRACKED_CONFIG.read_text())
    expected = build_models.shape_only_config().to_diff_dict()
    assert {k: v for k, v in tracked.items() if k != "transformers_version"} == \
        {k: v for k, v in expected.items() if k != "transformers_version"}


def test_its_shards_are_harvest_shards_own_format() -> None:
    # One header for both (harvest/safetensors_header.py, importable where the project's other packages are not).
    assert safetensors_header is shards.safetensors_header
    assert shard_name(12) == storage.shard_name(12)
    assert bench.DEFAULT_SHARD_SIZE == DEFAULT_SHARD_SIZE
