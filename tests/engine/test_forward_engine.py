"""The engine's prompt-only forward (what harvests run), on the real engine
(vLLM + vllm-lens, the tiny model, float32): each prompt gets exactly its own
rows, equal to HF's block outputs and to a Completion's capture."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from deployments.engine import EngineRefused, ForwardRequest, GenerateRequest, SamplingSpec
from deployments.tensor_codec import decode
from tests.fakes import FakeEngine, fake_row
from tests.hf_reference import SKY_IDS, reference

# Prompts of different lengths in one batch: a row of one must never land in another.
PROMPTS = [SKY_IDS, [128000, 13347], [128000, 791, 13180, 374, 6437, 13, 578, 7160, 374]]


async def test_each_prompt_gets_its_own_rows_equal_to_the_reference(tiny_engine: Any, hf_model: Any) -> None:
    rows = await tiny_engine.forward(ForwardRequest("fwd-ref", PROMPTS, [0, 2, 3]))
    assert [r.token_ids for r in rows] == PROMPTS
    for prompt, got in zip(PROMPTS, rows):
        assert got.rows.shape == (3, len(prompt), 64) and got.rows.dtype == np.float32
        assert got.dtype == "torch.float32"
        np.testing.assert_allclose(got.rows, reference(hf_model, prompt, [0, 2, 3]), atol=1e-4, rtol=1e-4)


async def test_the_forward_equals_a_completions_capture_of_the_prompt(tiny_engine: Any) -> None:
    (rows,) = await tiny_engine.forward(ForwardRequest("fwd-cap", [SKY_IDS], [1]))
    spec = SamplingSpec(max_tokens=2, temperature=0.0, final_only=True, capture_layers=[1])
    outputs = [out async for out in tiny_engine.generate(GenerateRequest("gen-cap", SKY_IDS, spec))]
    captured = decode(outputs[-1].activations["residual_stream"], max_bytes=1 << 20)
    np.testing.assert_array_equal(rows.rows, captured[:, :len(SKY_IDS)])


async def test_projections_are_the_rows_times_the_unit_directions(tiny_engine: Any) -> None:
    generator = np.random.default_rng(7)
    directions = generator.normal(size=(3, 64)).astype(np.float32)
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    plain = (await tiny_engine.forward(ForwardRequest("fwd-plain", [SKY_IDS], [0, 3])))[0]
    projected = (await tiny_engine.forward(ForwardRequest("fwd-proj", [SKY_IDS], [0, 3], directions)))[0]
    assert projected.rows.shape == (2, len(SKY_IDS), 3)
    np.testing.assert_allclose(projected.rows, plain.rows @ directions.T, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("layers, directions, param", [
    ([4], None, "layers"),
    ([2, 1], None, "layers"),
    ([0], np.ones((2, 32), np.float32), "project_onto"),
])
async def test_the_engine_refuses_what_vllm_lens_would_swallow(tiny_engine: Any, layers: list[int],
                                                              directions: Any, param: str) -> None:
    with pytest.raises(EngineRefused) as refused:
        await tiny_engine.forward(ForwardRequest("fwd-bad", [SKY_IDS], layers, directions))
    assert refused.value.param == param


async def test_the_fake_engine_keeps_the_same_contract() -> None:
    fake = FakeEngine()
    rows = await fake.forward(ForwardRequest("fake", [[5, 6, 7], [9]], [1, 3]))
    assert [r.rows.shape for r in rows] == [(2, 3, 64), (2, 1, 64)]
    np.testing.assert_array_equal(rows[1].rows[1, 0], fake_row(3, 9, 64))
    with pytest.raises(EngineRefused):
        await fake.forward(ForwardRequest("fake", [[5]], [4]))
