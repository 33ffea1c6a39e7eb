"""Reads of the residual stream on the real engine (vLLM + vllm-lens, the tiny
model, float32) equal HF transformers' hidden_states on the same weights."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from deployments.tensor_codec import decode
from tests.hf_reference import SKY_IDS, greedy, reference
from tests.spec import assert_error, validate



def test_the_reference_agrees_with_hidden_states_below_the_last_layer(hf_model: Any) -> None:
    with torch.no_grad():
        states = hf_model(torch.tensor([SKY_IDS]), output_hidden_states=True).hidden_states
    np.testing.assert_allclose(reference(hf_model, SKY_IDS, [0, 1, 2]),
                               np.stack([states[i + 1][0].numpy() for i in range(3)]), atol=1e-6)


async def capture(stack: Any, **fields: Any) -> dict:
    body = {"prompt": SKY_IDS, "temperature": 0, **fields}
    r = await stack.http.post("/v1/completions", headers=stack.auth(), json=body)
    assert r.status_code == 200, r.text
    validate(r.json(), "Completion")
    return r.json()


@pytest.mark.parametrize("layers", [[0, 2], [3, 0, 3], True])
async def test_a_read_equals_the_reference_on_prompt_and_generated_rows(real_stack: Any, hf_model: Any,
                                                                        layers: Any) -> None:
    body = await capture(real_stack, max_tokens=3, output_residual_stream=layers)
    wanted = list(range(4)) if layers is True else sorted(set(layers))
    tensor = body["activations"]["residual_stream"]
    assert (tensor["dtype"], tensor["original_dtype"], tensor["compression"]) == ("float32", "torch.float32", "zstd")
    rows = body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"] - 1
    array = decode(tensor, max_bytes=1 << 24)
    assert array.shape == (len(wanted), rows, 64)
    ids = greedy(hf_model, SKY_IDS, 3)
    np.testing.assert_allclose(array, reference(hf_model, ids[:-1], wanted), atol=1e-4, rtol=1e-4)


async def test_false_reads_nothing(real_stack: Any) -> None:
    """vllm-lens reads `false` as every Layer; the API never passes it on."""
    body = await capture(real_stack, max_tokens=2, output_residual_stream=False)
    assert "activations" not in body


async def test_a_stream_carries_the_activations_in_a_last_chunk(real_stack: Any) -> None:
    import json

    r = await real_stack.http.post("/v1/completions", headers=real_stack.auth(), json={
        "prompt": SKY_IDS, "max_tokens": 2, "stream": True, "output_residual_stream": [1]})
    events = [line.removeprefix("data: ") for line in r.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    last = json.loads(events[-2])
    assert "error" not in last, last
    assert last["choices"] == [] and last["object"] == "text_completion"
    assert last["activations"]["residual_stream"]["shape"] == [1, 5, 64]


async def test_a_misfit_answer_is_502_and_costs_nothing(real_stack: Any, monkeypatch: Any) -> None:
    from domain.completions.assembly import CompletionAssembly
    from tests.accounts import left

    original = CompletionAssembly.add

    def drop_activations(self: Any, p: int, output: Any) -> Any:
        output.activations = None
        return original(self, p, output)

    monkeypatch.setattr(CompletionAssembly, "add", drop_activations)
    before = (await left(real_stack)).allowance_used
    r = await real_stack.http.post("/v1/completions", headers=real_stack.auth(), json={
        "prompt": SKY_IDS, "max_tokens": 2, "output_residual_stream": [0]})
    assert_error(r, 502, "upstream_server_error", type="upstream_error", headers={"x-should-retry": "false"},
                 message="Inference's answer does not fit the request: its activations are missing.")
    assert (await left(real_stack)).allowance_used == before


async def test_the_spec_refusals_of_a_capture(real_stack: Any) -> None:
    async def post(**fields: Any) -> Any:
        return await real_stack.http.post("/v1/completions", headers=real_stack.auth(),
                                          json={"model": "llama-8b", "prompt": "The sky is", **fields})

    assert_error(await post(n=2, output_residual_stream=[0]), 400, "invalid_request",
                 param="output_residual_stream",
                 message="Set n to 1: activations and steering vectors are for one choice only.")
    assert_error(await post(max_tokens=2, output_residual_stream=[4]), 400, "invalid_request",
                 param="output_residual_stream",
                 message="acs/tiny-llama-random has Layers 0 to 3: it has no Layer 4.")
    assert_error(await post(max_tokens=2, output_residual_stream=[]), 400, "invalid_request",
                 param="output_residual_stream")


async def test_mixed_concurrent_requests_each_get_their_own_answer(real_stack: Any, hf_model: Any) -> None:
    """Plain, captured and steered requests in one batch: each answer is its own."""
    import asyncio

    rng = np.random.default_rng(1)
    vectors = [rng.standard_normal(64).astype(np.float32) * 5 for _ in range(3)]

    async def post(body: dict) -> dict:
        r = await real_stack.http.post("/v1/completions", headers=real_stack.auth(),
                                       json={"prompt": SKY_IDS, "max_tokens": 1, "temperature": 0, **body})
        assert r.status_code == 200, r.text
        return r.json()

    bodies = [{"output_residual_stream": [1]}] + [
        {"output_residual_stream": [1], "apply_steering_vectors": [{"activations": [v.tolist()], "layer_indices": [1]}]}
        for v in vectors] + [{}, {}]
    answers = await asyncio.gather(*[post(b) for b in bodies])
    plain = reference(hf_model, SKY_IDS, [1])[0]
    read = [decode(a["activations"]["residual_stream"], max_bytes=1 << 24)[0] for a in answers[:4]]
    np.testing.assert_allclose(read[0], plain, atol=1e-4)
    for got, vector in zip(read[1:], vectors):
        np.testing.assert_allclose(got, plain + vector, atol=1e-4)
    assert all("activations" not in a for a in answers[4:])
