"""Steering vectors on the real engine (vLLM + vllm-lens, the tiny model,
float32), against HF transformers with the same addition in a forward hook."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from deployments.tensor_codec import decode
from deployments.engine import EngineRefused, GenerateRequest, SamplingSpec, Steer
from tests.hf_reference import SKY_IDS, greedy, reference
from tests.spec import assert_error

RNG = np.random.default_rng(0)
V = RNG.standard_normal(64).astype(np.float32)
W = RNG.standard_normal(64).astype(np.float32)


def steer(vector: np.ndarray, layer: int = 1, **fields: Any) -> dict:
    return {"activations": [vector.tolist()], "layer_indices": [layer], **fields}


async def run(stack: Any, steers: list[dict] | None, layers: list[int], max_tokens: int = 1) -> tuple[np.ndarray, dict]:
    body = {"prompt": SKY_IDS, "max_tokens": max_tokens, "temperature": 0, "output_residual_stream": layers,
            "logprobs": 0}
    if steers is not None:
        body["apply_steering_vectors"] = steers
    r = await stack.http.post("/v1/completions", headers=stack.auth(), json=body)
    assert r.status_code == 200, r.text
    return decode(r.json()["activations"]["residual_stream"], max_bytes=1 << 24), r.json()


async def test_layer_l_moves_by_scale_v_and_l_minus_1_does_not(real_stack: Any, hf_model: Any) -> None:  # noqa: F811
    baseline, _ = await run(real_stack, [steer(V, scale=0)], [0, 1])
    steered, _ = await run(real_stack, [steer(V, scale=2)], [0, 1])
    np.testing.assert_array_equal(steered[0], baseline[0])
    np.testing.assert_allclose(steered[1] - baseline[1], np.broadcast_to(2 * V, baseline[1].shape), atol=1e-4)
    expected = reference(hf_model, SKY_IDS, [0, 1], {1: 2 * V})
    np.testing.assert_allclose(steered, expected, atol=1e-4, rtol=1e-4)


async def test_norm_match_adds_scale_times_the_streams_norm(real_stack: Any) -> None:
    baseline, _ = await run(real_stack, [steer(V, scale=0, norm_match=True)], [1])
    steered, _ = await run(real_stack, [steer(V, scale=0.5, norm_match=True)], [1])
    ratio = np.linalg.norm(steered[0] - baseline[0], axis=-1) / np.linalg.norm(baseline[0], axis=-1)
    np.testing.assert_allclose(ratio, 0.5, rtol=1e-3)


async def test_later_layers_and_tokens_follow_the_steered_reference(real_stack: Any, hf_model: Any) -> None:  # noqa: F811
    vector = 40 * V  # large enough to change what the tiny model writes
    steered, body = await run(real_stack, [steer(vector, layer=1)], [1, 3], max_tokens=3)
    ids = greedy(hf_model, SKY_IDS, 3, {1: vector})
    tokenizer = real_stack.services.tokenizers.get(real_stack.services.resolve_model(None))
    assert body["choices"][0]["logprobs"]["tokens"] == [tokenizer.decode(t) for t in ids[4:]]
    np.testing.assert_allclose(steered, reference(hf_model, ids[:-1], [1, 3], {1: vector}), atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("position", [2, 5])
async def test_position_steering_touches_only_its_position(real_stack: Any, position: int) -> None:
    """Position 5 is reached during decode (a prompt of 4 and max_tokens 3)."""
    rows = [[V.tolist()]]
    baseline, _ = await run(real_stack, [{"activations": rows, "layer_indices": [1], "position_indices": [position],
                                          "scale": 0}], [1], max_tokens=3)
    steered, _ = await run(real_stack, [{"activations": rows, "layer_indices": [1], "position_indices": [position],
                                         "scale": 2}], [1], max_tokens=3)
    moved = np.abs(steered[0] - baseline[0]).max(axis=-1) > 1e-3
    # Rows up to the steered position run the same tokens in both requests; after
    # it, the steer may change which tokens the model writes.
    assert moved[: position + 1].tolist() == [i == position for i in range(position + 1)]
    np.testing.assert_allclose(steered[0, position] - baseline[0, position], 2 * V, atol=1e-4)


async def test_a_span_steers_each_of_its_positions(real_stack: Any) -> None:
    baseline, _ = await run(real_stack, [steer(V, scale=0, position_spans=[[1, 3]])], [1])
    steered, _ = await run(real_stack, [steer(V, scale=1, position_spans=[[1, 3]])], [1])
    moved = np.abs(steered[0] - baseline[0]).max(axis=-1) > 1e-3
    assert moved.tolist() == [False, True, True, False]


async def test_vectors_on_one_layer_add(real_stack: Any) -> None:
    baseline, _ = await run(real_stack, [steer(V, scale=0)], [1])
    both, _ = await run(real_stack, [steer(V), steer(W)], [1])
    np.testing.assert_allclose(both[0] - baseline[0], np.broadcast_to(V + W, baseline[0].shape), atol=1e-4)


async def test_several_layers_at_once(real_stack: Any, hf_model: Any) -> None:  # noqa: F811
    """One vector with a row for each of two Layers, and a second vector on a third Layer."""
    steers = [{"activations": [V.tolist(), W.tolist()], "layer_indices": [2, 0], "scale": 3},
              steer(V - W, layer=1)]
    steered, _ = await run(real_stack, steers, [0, 1, 2, 3])
    expected = reference(hf_model, SKY_IDS, [0, 1, 2, 3], {2: 3 * V, 0: 3 * W, 1: V - W})
    np.testing.assert_allclose(steered, expected, atol=1e-4, rtol=1e-4)


async def test_a_plain_request_after_a_steered_one_is_not_contaminated(real_stack: Any) -> None:
    body = {"prompt": SKY_IDS + [11, 12, 13], "max_tokens": 4, "temperature": 0, "logprobs": 1}
    plain = (await real_stack.http.post("/v1/completions", headers=real_stack.auth(), json=body)).json()
    steered = {**body, "apply_steering_vectors": [steer(40 * V)]}
    assert (await real_stack.http.post("/v1/completions", headers=real_stack.auth(), json=steered)).status_code == 200
    again = (await real_stack.http.post("/v1/completions", headers=real_stack.auth(), json=body)).json()
    assert again["choices"][0]["logprobs"] == plain["choices"][0]["logprobs"]


async def test_a_wrong_hidden_size_never_answers_unsteered(real_stack: Any) -> None:
    r = await real_stack.http.post("/v1/completions", headers=real_stack.auth(), json={
        "prompt": SKY_IDS, "max_tokens": 1, "apply_steering_vectors": [steer(np.ones(63, dtype=np.float32))]})
    assert_error(r, 400, "invalid_request", param="apply_steering_vectors",
                 message="A Steering vector has 63 numbers, but the model's hidden size is 64.")


async def test_the_spec_refusals(real_stack: Any) -> None:
    r = await real_stack.http.post("/v1/completions", headers=real_stack.auth(), json={
        "model": "llama-8b", "prompt": "The sky is", "max_tokens": 2,
        "apply_steering_vectors": [{"activations": [[1, 2, 3]], "layer_indices": [1, 2]}]})
    assert_error(r, 400, "invalid_request", param="apply_steering_vectors",
                 message="activations needs one row for each layer in layer_indices.")
    r = await real_stack.http.post("/v1/completions", headers=real_stack.auth(), json={
        "prompt": SKY_IDS, "max_tokens": 2,
        "apply_steering_vectors": [{"activations": [[[0.0] * 64]], "layer_indices": [1], "position_indices": [5]}]})
    assert_error(r, 400, "invalid_request", param="apply_steering_vectors", message=(
        "apply_steering_vectors steers position 5, but the forward passes of this request reach position 4 at "
        "most: the prompt has 4 tokens and max_tokens is 2, and the last generated token never runs through the "
        "model. Steer a position up to 4, or raise max_tokens."))


async def test_reads_and_position_steering_span_prefill_chunks(real_stack: Any, hf_model: Any) -> None:  # noqa: F811
    """The tiny model prefills 32 tokens a step: a 90-token prompt runs in three chunks."""
    prompt = [128000] + [int(t) for t in RNG.integers(1000, 100000, size=89)]
    rows = [[V.tolist()]]

    async def read(scale: float) -> np.ndarray:
        r = await real_stack.http.post("/v1/completions", headers=real_stack.auth(), json={
            "prompt": prompt, "max_tokens": 1, "temperature": 0, "output_residual_stream": [1, 2],
            "apply_steering_vectors": [{"activations": rows, "layer_indices": [1], "position_indices": [70],
                                        "scale": scale}]})
        assert r.status_code == 200, r.text
        return decode(r.json()["activations"]["residual_stream"], max_bytes=1 << 24)

    baseline, steered = await read(0.0), await read(3.0)
    np.testing.assert_allclose(baseline, reference(hf_model, prompt, [1, 2]), atol=1e-4, rtol=1e-4)
    moved = np.abs(steered[0] - baseline[0]).max(axis=-1) > 1e-3
    assert np.flatnonzero(moved).tolist() == [70]
    np.testing.assert_allclose(steered[0, 70] - baseline[0, 70], 3 * V, atol=1e-4)


@pytest.mark.parametrize("sampling, message", [
    (dict(steering=[Steer(np.ones((1, 63), np.float32), [1])]),
     "A Steering vector has 63 numbers, but the model's hidden size is 64."),
    (dict(steering=[Steer(np.ones((1, 64), np.float32), [4])]),
     "acs/tiny-llama-random has Layers 0 to 3: it has no Layer 4."),
    (dict(steering=[Steer(np.ones((1, 64), np.float32), [1, 2])]),
     "activations needs one row for each layer in layer_indices."),
    (dict(steering=[Steer(np.ones((1, 1, 64), np.float32), [1], positions=[5])]),
     "apply_steering_vectors steers position 5, but the forward passes of this request reach position 4 at "
     "most: the prompt has 4 tokens and max_tokens is 2, and the last generated token never runs through the "
     "model. Steer a position up to 4, or raise max_tokens."),
    (dict(capture_layers=[0, 7]), "acs/tiny-llama-random has Layers 0 to 3: it has no Layer 7."),
])
async def test_the_engine_refuses_what_vllm_lens_would_swallow(tiny_engine: Any, sampling: dict,
                                                               message: str) -> None:
    """vllm-lens's hooks swallow their errors; the engine refuses first, with the API's words."""
    request = GenerateRequest("refused", SKY_IDS, SamplingSpec(max_tokens=2, **sampling))
    with pytest.raises(EngineRefused) as refused:
        async for _ in tiny_engine.generate(request):
            pass
    assert refused.value.message == message


async def test_a_model_without_facts_gets_inferences_refusal(real_stack: Any, monkeypatch: Any) -> None:
    """Without hidden_size in the catalog the API cannot check the width: Inference's 400 comes through."""
    from deployments.catalog import ModelSpec

    monkeypatch.setattr(ModelSpec, "hidden_size", property(lambda self: None))
    r = await real_stack.http.post("/v1/completions", headers=real_stack.auth(), json={
        "prompt": SKY_IDS, "max_tokens": 1, "apply_steering_vectors": [steer(np.ones(63, dtype=np.float32))]})
    assert_error(r, 400, "invalid_request", param="apply_steering_vectors",
                 message="A Steering vector has 63 numbers, but the model's hidden size is 64.")
