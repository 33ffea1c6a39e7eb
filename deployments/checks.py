"""The facts of a served model and the checks that both sides of the engine
boundary make against them: the API before it holds tokens, and the engine
again for every caller (vllm-lens swallows its hooks' errors, so a vector of
the wrong width or a Layer the model lacks would answer 200, unsteered or
unread).

A failed check raises `EngineRefused`, the neutral refusal of a request's
values; the API answers it as its 400 (`domain/error_mapping.py`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from deployments.engine import EngineRefused

STEERING_PARAM = "apply_steering_vectors"
LAYER = "{model} has Layers 0 to {last}: it has no Layer {layer}."  # the spec's words
ROWS = "activations needs one row for each layer in layer_indices."
HIDDEN_SIZE = "A Steering vector has {count} numbers, but the model's hidden size is {hidden}."
REACH = ("apply_steering_vectors steers position {position}, but the forward passes of this request reach "
         "position {last} at most: the prompt has {prompt} tokens and max_tokens is {max_tokens}, and the last "
         "generated token never runs through the model. Steer a position up to {last}, or raise max_tokens.")


class ModelInfo(Protocol):
    """The facts of a served model that the checks need (GET /v1/models).

    `n_layers`, `hidden_size` and `vocab_size` may be None for a served model
    without those facts: Inference then checks what depends on them. An
    optional `served_model_name` (such as "meta-llama/Llama-3.1-8B") names the
    model in the Layer message, as the spec's example does; else `id`.
    """

    # Read-only: the checks only read them, so a frozen ModelFacts is a ModelInfo too.
    @property
    def id(self) -> str: ...
    @property
    def max_model_len(self) -> int: ...
    @property
    def n_layers(self) -> int | None: ...
    @property
    def hidden_size(self) -> int | None: ...
    @property
    def vocab_size(self) -> int | None: ...


@dataclass(frozen=True)
class ModelFacts:
    """A ModelInfo: the catalog's facts (the API) or the loaded model's (the engine)."""

    id: str
    served_model_name: str
    max_model_len: int
    n_layers: int | None
    hidden_size: int | None
    vocab_size: int | None


def check_layers(layers: list[int], model: ModelInfo, param: str) -> None:
    """Refuse a Layer that the model does not have, with the spec's message.

    A model without n_layers leaves the check to Inference (docs: Read Activations).
    """
    if model.n_layers is None:
        return
    missing = [layer for layer in layers if layer >= model.n_layers]
    if missing:
        name = getattr(model, "served_model_name", None) or model.id
        raise EngineRefused(LAYER.format(model=name, last=model.n_layers - 1, layer=min(missing)), param)


def check_shape(rows: Any, layers: list[int], hidden_size: int | None) -> None:
    """One row per Layer, then the model's width (unknown: Inference checks it)."""
    if rows.shape[0] != len(layers):
        raise EngineRefused(ROWS, STEERING_PARAM)
    if hidden_size is not None and rows.shape[-1] != hidden_size:
        raise EngineRefused(HIDDEN_SIZE.format(count=rows.shape[-1], hidden=hidden_size), STEERING_PARAM)


def check_reach(positions: list[int], prompt_tokens: int, max_tokens: int) -> None:
    """Forward passes run each prompt token and each generated token but the last."""
    last = prompt_tokens + max(max_tokens, 1) - 2
    beyond = max(positions, default=-1)
    if beyond > last:
        raise EngineRefused(REACH.format(position=beyond, last=last, prompt=prompt_tokens, max_tokens=max_tokens),
                            STEERING_PARAM)
