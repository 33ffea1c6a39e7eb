"""bench/eager_steps.py, the GPU's eager-against-graph bench, checked on the CPU: its hand-written
Llama step is Hugging Face's Llama (Llama 3's rope scaling, grouped-query attention, the KV cache
written one slot a step), the capture and the steer do what they say, and a CPU run reports eager
figures and no graph ones. The graph side needs CUDA; the bench checks it against eager there."""
import json
from pathlib import Path

import pytest
import torch

from bench import eager_steps
from cluster.build_models import LLAMA_8B_CONFIG

# Llama 3.1 8B's rope (llama3 scaling, theta 500000) on a tiny model: with head_dim 32 its
# wavelengths fall in all three of the scaling's bands (kept, smoothed, divided by the factor).
TINY_FIELDS = {**LLAMA_8B_CONFIG, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3,
               "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 300}


def tiny_config() -> dict:
    from transformers import LlamaConfig

    return LlamaConfig(**TINY_FIELDS).to_dict()


def hugging_face_twin(model: eager_steps.Llama, config: dict):
    """LlamaForCausalLM holding `model`'s weights, split back into Hugging Face's projections."""
    from transformers import LlamaConfig, LlamaForCausalLM

    hf = LlamaForCausalLM(LlamaConfig(**TINY_FIELDS, attn_implementation="eager")).eval()
    s = model.shape
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    with torch.no_grad():
        hf.model.embed_tokens.weight.copy_(model.embed)
        hf.model.norm.weight.copy_(model.norm)
        hf.lm_head.weight.copy_(model.lm_head)
        for ours, theirs in zip(model.layers, hf.model.layers):
            wq, wk, wv = ours.qkv.split([q, kv, kv])
            gate, up = ours.gate_up.chunk(2)
            pairs = [(theirs.input_layernorm.weight, ours.attn_norm), (theirs.self_attn.q_proj.weight, wq),
                     (theirs.self_attn.k_proj.weight, wk), (theirs.self_attn.v_proj.weight, wv),
                     (theirs.self_attn.o_proj.weight, ours.o), (theirs.post_attention_layernorm.weight, ours.mlp_norm),
                     (theirs.mlp.gate_proj.weight, gate), (theirs.mlp.up_proj.weight, up),
                     (theirs.mlp.down_proj.weight, ours.down)]
            for target, source in pairs:
                target.copy_(source)
    return hf


@pytest.fixture(scope="module")
def tiny() -> tuple[eager_steps.Llama, dict]:
    config = tiny_config()
    shape = eager_steps.Shape.of(config)
    return eager_steps.Llama(shape, eager_steps.rope_inv_freq(config, shape.head_dim), dtype=torch.float32, device="cpu"), config


def decode_prompts(model: eager_steps.Llama, prompts: torch.Tensor, lens=None) -> torch.Tensor:
    """Logits [batch, length, vocab] of feeding each prompt one token a step."""
    batch, length = prompts.shape
    cache = model.new_cache(batch, length + 3, fill=False)
    steps = [model.step(prompts[:, p], torch.full((batch,), p), cache, lens) for p in range(length)]
    return torch.stack(steps, dim=1)


def test_the_rope_frequencies_are_hugging_faces_llama3_scaled_ones(tiny) -> None:
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    model, config = tiny
    theirs = LlamaRotaryEmbedding(LlamaConfig(**TINY_FIELDS)).inv_freq
    plain = eager_steps.rope_inv_freq({**config, "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"}}, 32)
    assert torch.allclose(model.inv_freq, theirs, rtol=1e-6, atol=0)
    assert not torch.allclose(plain, theirs), "the scaling changed nothing: the test would not see it missing"


def test_steps_from_the_cache_give_hugging_faces_logits_at_every_position(tiny) -> None:
    model, config = tiny
    prompts = torch.tensor([[5, 17, 200, 3, 99, 42, 7, 250], [1, 2, 3, 4, 5, 6, 7, 8]])
    ours = decode_prompts(model, prompts)
    with torch.no_grad():
        theirs = hugging_face_twin(model, config)(prompts).logits
    assert ours.shape == theirs.shape == (2, 8, 300)
    assert torch.allclose(ours, theirs, atol=1e-5, rtol=1e-4), (ours - theirs).abs().max()


def test_a_capture_holds_each_layers_residual_stream_as_hugging_faces_hidden_states(tiny) -> None:
    model, config = tiny
    prompt = torch.tensor([[5, 17, 200, 3]])
    lens = eager_steps.make_lens("capture", model, batch=1)
    cache = model.new_cache(1, 8, fill=False)
    for p in range(prompt.shape[1]):
        model.step(prompt[:, p], torch.tensor([p]), cache, lens)
    with torch.no_grad():
        hidden = hugging_face_twin(model, config)(prompt, output_hidden_states=True).hidden_states
    # vllm-lens's Layer L is hidden_states[L + 1]; the last entry is after the final norm in HF.
    for layer in range(model.shape.layers - 1):
        assert torch.allclose(lens.captured[layer][0], hidden[layer + 1][0, -1], atol=1e-5), layer


def test_a_steer_adds_its_vector_at_its_layer_and_changes_the_logits(tiny) -> None:
    model, _ = tiny
    prompt = torch.tensor([[5, 17, 200]])
    steer = eager_steps.make_lens("steer", model, batch=1)
    captured = eager_steps.make_lens("capture", model, batch=1)
    both = eager_steps.Lens(captured=captured.captured, steer_layer=steer.steer_layer, steer_vector=steer.steer_vector)
    plain = eager_steps.make_lens("capture", model, batch=1)
    steered_logits = decode_prompts(model, prompt, both)
    plain_logits = decode_prompts(model, prompt, plain)
    layer = steer.steer_layer
    assert layer == model.shape.layers // 2
    assert torch.allclose(both.captured[layer - 1], plain.captured[layer - 1])
    assert torch.allclose(both.captured[layer] - plain.captured[layer], steer.steer_vector, atol=1e-5)
    assert not torch.allclose(steered_logits, plain_logits)


def test_a_cpu_run_reports_eager_steps_and_no_graphs(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(tiny_config()))
    out = tmp_path / "out.json"
    summary = eager_steps.main(["--config", str(config), "--device", "cpu", "--batches", "1", "3",
                                "--context", "6", "--steps", "3", "--warmup", "1", "--rounds", "2", "--json", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(summary))
    assert [b["batch"] for b in summary["batches"]] == [1, 3]
    for batch in summary["batches"]:
        assert set(batch["ms"]) == {"plain/eager", "capture/eager", "steer/eager"}
        assert all(len(rounds) == 2 and min(rounds) > 0 for rounds in batch["ms_rounds"].values())
        assert batch["checks"] == {} and batch["steer_max_logit_change"] > 0


def test_the_default_config_is_the_8b_folders() -> None:
    args = eager_steps.parse_args([])
    assert args.config.parts[-2:] == ("llama-8b-random", "config.json")
    assert args.batches == [1, 16, 64]
