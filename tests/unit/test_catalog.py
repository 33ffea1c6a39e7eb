"""The model catalog: profiles, name resolution, capabilities (no engine)."""

from __future__ import annotations

from pathlib import Path

import pytest

from deployments.catalog import CatalogError, ModelSpec, load_catalog, models_dir

TINY_DIR = models_dir() / "tiny-llama"
tiny_built = pytest.mark.skipif(
    not (TINY_DIR / "config.json").is_file() or not (TINY_DIR / "tokenizer.json").is_file(),
    reason=f"{TINY_DIR} is not built; run `python -m cluster.build_models --only tiny`",
)


@pytest.fixture(scope="module")
def gpu():
    return load_catalog("gpu")


@pytest.fixture(scope="module")
def test_profile():
    return load_catalog("test")


def test_gpu_profile_resolves_id_and_served_name(gpu):
    assert gpu.default_id == "llama-8b"
    assert list(gpu.models) == ["llama-8b", "llama-405b", "trinity-truebase"]
    assert gpu.resolve("llama-405b").served_model_name == "meta-llama/Llama-3.1-405B"
    assert gpu.resolve("meta-llama/Llama-3.1-8B").id == "llama-8b"
    assert gpu.resolve(None).id == "llama-8b"
    assert gpu.resolve("gpt-4") is None


def test_gpu_models_capabilities_match_the_spec(gpu):
    caps = gpu.resolve("llama-8b").capabilities()
    assert caps == {
        "max_model_len": 131072,
        "max_logprobs": 100,
        "max_output_work_tokens": 32000,
        "max_inflight_per_key": 16,
        "max_queued_per_key": 64,
        "rate_limit_per_minute": 600,
        "logprobs": True,
        "prompt_logprobs": True,
        "prompt_logprobs_full_vocab": True,
        "full_vocab_max_prompt_tokens": 256,
        "activations": True,
        "max_steering_vectors": 8,
        "max_activation_prompt_tokens": 256,
        "n_layers": 32,
        "hidden_size": 4096,
        "chat_template": None,
    }
    trinity = gpu.resolve("trinity-truebase")
    assert (trinity.n_layers, trinity.hidden_size, trinity.max_model_len) == (60, 3072, 8192)
    assert gpu.resolve("llama-405b").engine.tensor_parallel_size == 8
    assert not gpu.resolve("llama-8b").is_local
    assert gpu.resolve("llama-8b").weights_path() == "meta-llama/Llama-3.1-8B"


def test_profiles_alias_llama_8b_to_their_cpu_default(test_profile):
    embedded = load_catalog("embedded")
    assert embedded.resolve("llama-8b").id == "smollm2-135m"
    assert embedded.resolve("HuggingFaceTB/SmolLM2-135M-Instruct").id == "smollm2-135m"
    assert embedded.default.default is True
    assert test_profile.resolve("llama-8b").id == "tiny-llama"
    assert test_profile.resolve("acs/tiny-llama-random").id == "tiny-llama"
    # The profile decides the default, whatever the model YAML says.
    assert test_profile.default.id == "tiny-llama" and test_profile.default.default


def test_local_weights_resolve_against_models_dir(test_profile, tmp_path):
    assert test_profile.resolve("tiny-llama").is_local
    spec = load_catalog("test", models_root=tmp_path).resolve("tiny-llama")
    assert spec.weights_path() == str(tmp_path.resolve() / "tiny-llama")
    assert spec.tokenizer_path() == str(tmp_path.resolve() / "tiny-llama")
    # The spec a replica gets carries the resolved folder, not the setting.
    assert ModelSpec.model_validate(spec.model_dump(by_alias=True)).weights_path() == spec.weights_path()


def test_profile_by_path_and_bad_alias(tmp_path):
    good = tmp_path / "one.yaml"
    good.write_text("models: [tiny-llama]\ndefault: tiny-llama\n")
    assert load_catalog(good).default_id == "tiny-llama"
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [tiny-llama]\naliases: {llama-8b: smollm2-135m}\n")
    with pytest.raises(CatalogError, match="not served"):
        load_catalog(bad)


def test_cpu_models_engine_and_autoscaling(test_profile):
    spec = test_profile.resolve("tiny-llama")
    assert spec.engine.engine_args()["dtype"] == "float32"
    assert spec.max_model_len == 2048
    assert spec.autoscaling.min_replicas == 1
    assert spec.ray_actor_options.num_cpus == 0.5
    assert spec.gpu_shape == "cpu"


@tiny_built
def test_tiny_capabilities_come_from_config_json(test_profile):
    caps = test_profile.resolve("tiny-llama").capabilities()
    assert (caps["n_layers"], caps["hidden_size"]) == (4, 64)
    assert caps["max_model_len"] == 2048
    assert caps["max_activation_prompt_tokens"] == 2**25 // (4 * 64)


@tiny_built
def test_tiny_tokenizer_matches_llama_31():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(TINY_DIR)
    assert tok("The sky is", add_special_tokens=True)["input_ids"] == [128000, 791, 13180, 374]
    assert len(tok) == 128256
    assert tok.convert_ids_to_tokens([128000, 128001, 128005, 128011, 128255]) == [
        "<|begin_of_text|>",
        "<|end_of_text|>",
        "<|reserved_special_token_2|>",
        "<|reserved_special_token_3|>",
        "<|reserved_special_token_247|>",
    ]


def test_models_dir_setting(monkeypatch, tmp_path):
    from domain.settings import Settings

    monkeypatch.setenv("ACS_MODELS_DIR", str(tmp_path))
    assert models_dir(Settings().models_dir) == Path(tmp_path).resolve()
    assert models_dir(None) == Path(__file__).resolve().parents[2] / "models"


def test_harvests_run_on_the_torch_engine_but_where_a_model_needs_several_gpus(gpu, test_profile):
    assert {model.id: model.harvest_engine for model in gpu.models.values()} == {
        "llama-8b": "torch", "llama-405b": "vllm", "trinity-truebase": "vllm"}
    assert test_profile.models["tiny-llama"].harvest_engine == "torch"
    split = gpu.models["llama-405b"].model_dump(by_alias=True)
    with pytest.raises(ValueError, match="harvest_engine torch runs on one device, and the model needs "
                                         "tensor_parallel_size 8: set harvest_engine: vllm"):
        ModelSpec.model_validate({**split, "harvest_engine": "torch"})
    with pytest.raises(ValueError, match="harvest_engine"):
        ModelSpec.model_validate({**split, "harvest_engine": "hf"})
