"""The torch forward engine of harvests (harvest/torch_forward.py) on the tiny model: each prompt's rows
equal HF's block outputs and a Completion's capture (float32 rounding on a CPU, bfloat16 rounding in
bfloat16), alone or packed with others, and it refuses what the vLLM engine refuses."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from deployments.catalog import load_catalog
from deployments.engine import EngineRefused, ForwardRequest, GenerateRequest, SamplingSpec
from deployments.tensor_codec import bfloat16_bits_to_float32, decode
from harvest.shards import packed_values
from harvest.torch_forward import TorchForward, pack
from tests.hf_reference import SKY_IDS, reference

MODEL = load_catalog("test").models["tiny-llama"]
FLOAT32 = 1e-5  # relative: float32 sums in another order
BF16 = 2.0**-7  # bfloat16 keeps 8 significant bits; a pass in bfloat16 rounds at every block
LAST = 3  # the tiny model's last Layer, which HF gives after the final norm: read before it here


def engine(token_budget: int | None = None, dtype: torch.dtype = torch.float32) -> TorchForward:
    from transformers import AutoModel

    model = AutoModel.from_pretrained(MODEL.weights_path(), dtype=dtype, attn_implementation="sdpa")
    return TorchForward(model, model_id=MODEL.served_model_name, max_model_len=MODEL.engine.max_model_len,
                        token_budget=token_budget)


@pytest.fixture(scope="module")
def torch_engine() -> Any:
    # A budget of 48 padded tokens: the prompts below run in several batches of different sizes.
    made = engine(token_budget=48)
    yield made
    made.shutdown()


def prompts(seed: int, lengths: list[int]) -> list[list[int]]:
    generator = np.random.default_rng(seed)
    return [[128000, *generator.integers(200, 120000, size=n - 1).tolist()] for n in lengths]


MIXED = prompts(1, [4, 31, 1, 17, 9, 9, 2, 40])


def relative_error(got: np.ndarray, expected: np.ndarray) -> float:
    return float(np.abs(got - expected).max() / np.abs(expected).max())


async def test_each_prompt_gets_its_own_rows_equal_to_hfs_block_outputs(torch_engine: TorchForward,
                                                                       hf_model: Any) -> None:
    rows = await torch_engine.forward(ForwardRequest("mixed", MIXED, [0, 2, LAST]))
    assert [r.token_ids for r in rows] == MIXED
    for prompt, got in zip(MIXED, rows):
        assert got.rows.shape == (3, len(prompt), 64) and got.rows.dtype == np.float32
        assert got.dtype == "torch.float32"
        assert relative_error(got.rows, reference(hf_model, prompt, [0, 2, LAST])) < FLOAT32


async def test_a_prompt_alone_equals_the_same_prompt_in_a_full_batch(torch_engine: TorchForward) -> None:
    batched = await torch_engine.forward(ForwardRequest("batched", MIXED, [1, 2]))
    for index in (0, 1, 2, 7):
        (alone,) = await torch_engine.forward(ForwardRequest(f"alone-{index}", [MIXED[index]], [1, 2]))
        assert relative_error(batched[index].rows, alone.rows) < FLOAT32


async def test_the_rows_equal_a_completions_capture_of_the_prompt(torch_engine: TorchForward,
                                                                  tiny_engine: Any) -> None:
    (rows,) = await torch_engine.forward(ForwardRequest("cap", [SKY_IDS], [0, LAST]))
    spec = SamplingSpec(max_tokens=1, temperature=0.0, final_only=True, capture_layers=[0, LAST])
    outputs = [out async for out in tiny_engine.generate(GenerateRequest("torch-cap", SKY_IDS, spec))]
    captured = decode(outputs[-1].activations["residual_stream"], max_bytes=1 << 20)
    assert relative_error(rows.rows, captured[:, :len(SKY_IDS)]) < FLOAT32


async def test_projections_are_the_rows_times_the_unit_directions_made_on_the_device(
        torch_engine: TorchForward) -> None:
    generator = np.random.default_rng(7)
    directions = generator.normal(size=(3, 64)).astype(np.float32)
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    plain = await torch_engine.forward(ForwardRequest("plain", MIXED, [0, LAST]))
    projected = await torch_engine.forward(ForwardRequest("projected", MIXED, [0, LAST], directions))
    for prompt, rows, projection in zip(MIXED, plain, projected):
        assert projection.rows.shape == (2, len(prompt), 3) and projection.rows.dtype == np.float32
        np.testing.assert_allclose(projection.rows, rows.rows @ directions.T, atol=1e-5, rtol=1e-5)


async def test_a_bfloat16_model_hands_over_its_bits_within_bfloat16_rounding(hf_model: Any) -> None:
    made = engine(token_budget=48, dtype=torch.bfloat16)
    try:
        rows = await made.forward(ForwardRequest("bf16", MIXED[:4], [1, LAST]))
    finally:
        made.shutdown()
    for prompt, got in zip(MIXED[:4], rows):
        assert got.dtype == "torch.bfloat16" and got.rows.dtype == np.uint16
        assert packed_values(got.rows, projecting=False).tobytes() == np.ascontiguousarray(got.rows).tobytes()
        expected = reference(hf_model, prompt, [1, LAST])
        assert relative_error(bfloat16_bits_to_float32(got.rows), expected) < 8 * BF16


async def test_the_pass_stops_at_the_last_layer_read(torch_engine: TorchForward) -> None:
    ran: list[int] = []
    hooks = [block.register_forward_hook(lambda _m, _i, _o, i=i: ran.append(i))
             for i, block in enumerate(torch_engine.blocks)]
    try:
        await torch_engine.forward(ForwardRequest("short", [SKY_IDS], [0, 1]))
    finally:
        for hook in hooks:
            hook.remove()
    assert ran == [0, 1]


@pytest.mark.parametrize("layers, directions, param", [
    ([4], None, "layers"),
    ([2, 1], None, "layers"),
    ([0], np.ones((2, 32), np.float32), "project_onto"),
])
async def test_it_refuses_what_the_vllm_engine_refuses(torch_engine: TorchForward, layers: list[int],
                                                       directions: Any, param: str) -> None:
    with pytest.raises(EngineRefused) as refused:
        await torch_engine.forward(ForwardRequest("bad", [SKY_IDS], layers, directions))
    assert refused.value.param == param


async def test_no_prompts_is_no_rows(torch_engine: TorchForward) -> None:
    assert await torch_engine.forward(ForwardRequest("none", [], [0])) == []


def test_packing_runs_the_longest_first_within_the_budget_and_each_prompt_once() -> None:
    lengths = [5, 40, 1, 12, 12, 3, 70, 8]
    batches = pack(lengths, 48)
    assert sorted(i for batch in batches for i in batch.members) == list(range(len(lengths)))
    assert [batch.members[0] for batch in batches][:2] == [6, 1]  # 70 alone: over the budget
    for batch in batches:
        assert batch.lengths == sorted(batch.lengths, reverse=True)
        assert batch.lengths == [lengths[i] for i in batch.members]
        assert batch.padded_tokens <= 48 or len(batch.members) == 1
    assert [b.members for b in pack([3, 3, 3], 6)] == [[0, 1], [2]]  # equal lengths keep their order
