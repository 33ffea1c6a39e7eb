"""Inference's own checks of Activations and Steering vectors.

vllm-lens trap: its hooks swallow errors, so a vector of the wrong hidden
size or a Layer the model lacks answers 200, unsteered or unread. The API
refuses both for the models whose facts GET /v1/models lists; the engine
checks again for every caller (a served model without those facts, Jobs, a
direct handle), with the same checks and messages, as the spec says Inference does.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from deployments.checks import STEERING_PARAM, ModelFacts, check_layers, check_reach, check_shape
from deployments.engine import EngineRefused, ForwardRequest, GenerateRequest

if TYPE_CHECKING:  # vLLM loads only where an engine is built
    from vllm.config import ModelConfig

DIRECTIONS_WIDTH = "project_onto has directions of {count} numbers, but the model's hidden size is {hidden}."


def engine_facts(model_config: ModelConfig) -> ModelFacts:
    """What the loaded model says of itself."""
    text = model_config.hf_text_config
    name = model_config.served_model_name
    if not isinstance(name, str):  # vLLM makes it one str as it builds the config (get_served_model_name)
        raise TypeError(f"vLLM's served_model_name is {name!r}, not one name")
    return ModelFacts(id=name, served_model_name=name,
                      max_model_len=model_config.max_model_len, n_layers=text.num_hidden_layers,
                      hidden_size=text.hidden_size, vocab_size=text.vocab_size)


def check_lens_request(request: GenerateRequest, facts: ModelFacts) -> None:
    """Raise EngineRefused (a 400 of Inference) for what vllm-lens would swallow."""
    spec = request.sampling
    if spec.capture_layers:
        check_layers(spec.capture_layers, facts, "output_residual_stream")
    for steer in spec.steering or []:
        check_shape(steer.rows, steer.layer_indices, facts.hidden_size)
        check_layers(steer.layer_indices, facts, STEERING_PARAM)
        check_reach(steer.positions or [], len(request.prompt_token_ids), spec.max_tokens)


def check_forward_request(request: ForwardRequest, facts: ModelFacts) -> None:
    """A harvest's forward passes: Layers the model has, directions of its width."""
    check_layers(request.layers, facts, "layers")
    if list(request.layers) != sorted(set(request.layers)):
        raise EngineRefused("The Layers of a forward pass are ascending and unique.", "layers")
    directions = request.directions
    if directions is not None and (directions.ndim != 2 or directions.shape[1] != facts.hidden_size):
        width = directions.shape[-1] if directions.ndim else 0
        raise EngineRefused(DIRECTIONS_WIDTH.format(count=width, hidden=facts.hidden_size), "project_onto")
