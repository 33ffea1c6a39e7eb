"""The Completion request after strict validation, in the engine's terms.

`domain.completions.validation.parse_completion_request` builds a
CompletionRequest from the raw JSON body; `domain.completions.planning.plan`
resolves token counts, caps and `max_tokens` into a PlannedRequest.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from deployments.engine import SamplingFields, SamplingSpec, Steer

Prompt = str | list[int]


@dataclass(kw_only=True)
class CompletionRequest(SamplingFields):
    prompts: list[Prompt]
    model: str | None = None
    max_tokens: int | None = None
    echo: bool = False
    add_special_tokens: bool = True
    stream: bool = False
    include_usage: bool = False
    continuous_usage_stats: bool = False
    user: str | None = None
    # vllm-lens block: None = not asked; True = every Layer; list = those Layers.
    output_residual_stream: Literal[True] | list[int] | None = None
    apply_steering_vectors: list[dict] | None = None


@dataclass(frozen=True)
class Capture:
    layers: list[int]
    hidden_size: int


@dataclass
class PlannedRequest:
    """A request whose prompts are tokenized and whose max_tokens is decided."""

    request: CompletionRequest
    prompt_token_ids: list[list[int]]
    max_tokens: int
    # "client" when the caller set max_tokens, "default" when we chose it.
    max_tokens_source: Literal["client", "default"]
    # The default was lowered to the 15,600 non-stream limit.
    deadline_clamped: bool = False
    # output_residual_stream, resolved: the Layers to read, and the rows' width.
    capture: Capture | None = None
    # apply_steering_vectors, decoded and checked against the model.
    steering: list[Steer] | None = None

    def sampling(self, max_tokens: int | None = None) -> SamplingSpec:
        shared = {f.name: getattr(self.request, f.name) for f in fields(SamplingFields)}
        return SamplingSpec(
            **{**shared, "stop": list(self.request.stop)},
            max_tokens=self.max_tokens if max_tokens is None else max_tokens,
            capture_layers=list(self.capture.layers) if self.capture else None,
            steering=list(self.steering) if self.steering else None,
        )
