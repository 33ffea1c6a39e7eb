"""The engine boundary: what the API needs from one served model.

Everything that crosses it is a plain dataclass, so it pickles through a
Ray Serve DeploymentHandle and a fake engine (tests only) can produce it.
The real implementation is `deployments.vllm_engine.VllmEngine`. Harvests need
only the prompt-only forward (`ForwardEngine`), which `harvest.torch_forward`
also implements with PyTorch alone.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, AsyncIterator


@dataclass
class TokenLogprob:
    logprob: float
    rank: int | None
    decoded_token: str | None


# One position's top tokens (and the chosen one), keyed by token id.
PositionLogprobs = dict[int, TokenLogprob]


@dataclass(frozen=True)
class Steer:
    """One Steering vector: rows [layers, hidden], or [layers, positions, hidden] with
    absolute `positions` (counted from 0 at the first prompt token)."""

    rows: Any  # a float32 numpy array
    layer_indices: list[int]
    scale: float = 1.0
    norm_match: bool = False
    positions: list[int] | None = None


@dataclass(kw_only=True)
class SamplingFields:
    """The sampling fields of a Completion with the API's defaults: the request
    carries them, and the engine gets them as they are."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    priority: int = 0


@dataclass(kw_only=True)
class SamplingSpec(SamplingFields):
    """Every sampling field, always set: the model's generation_config never decides."""

    max_tokens: int
    # One output at the end instead of one per step: a request without a
    # stream then crosses the replica boundary once, not once per token.
    final_only: bool = False
    # vllm-lens: read the residual stream at these Layers (ascending, never
    # empty; None reads nothing). The plugin reads any other value but None,
    # even False, as "every Layer", so only a list ever reaches it.
    capture_layers: list[int] | None = None
    steering: list[Steer] | None = None


@dataclass
class GenerateRequest:
    request_id: str
    prompt_token_ids: list[int]
    sampling: SamplingSpec


@dataclass
class ChoiceDelta:
    """What one choice (sample `index` of the prompt) added since the last output."""

    index: int
    text: str
    token_ids: list[int]
    logprobs: list[PositionLogprobs] | None = None
    finish_reason: str | None = None
    stop_reason: str | int | None = None


@dataclass
class EngineOutput:
    """One step of a generation. `prompt_logprobs` comes with the first output only."""

    request_id: str
    prompt_token_ids: list[int]
    choices: list[ChoiceDelta]
    finished: bool = False
    prompt_logprobs: list[PositionLogprobs | None] | None = None
    # With the last output of a capture: {"residual_stream": encoded tensor}.
    activations: dict | None = None
    # Where the engine's time went, in seconds, on the first and the last output
    # (domain/timing.py names them): "vllm" (our wrapper's call to this output),
    # "queue", "prefill", "decode". None from an engine that does not time itself.
    timing: dict[str, float] | None = None


@dataclass
class EngineState:
    """What the status route reads: whether the engine serves, and its boot stage."""

    ready: bool
    stage: str | None = None
    stage_started_at: float | None = None


@dataclass
class ForwardRequest:
    """Prompt-only forward passes (harvests): no token is sampled.

    `layers` are ascending and unique. With `directions` (a float32 array
    [k, hidden] of unit vectors) each row is projected onto them.
    """

    request_id: str
    prompts: list[list[int]]  # token ids, one list per prompt
    layers: list[int]
    directions: Any = None


@dataclass
class PromptRows:
    """One prompt's own rows [layers, tokens, hidden], or [layers, tokens, k] projected (float32).

    `rows` is float32, or uint16 holding the bfloat16 bits of a model that runs in bfloat16 (the
    torch engine on a GPU hands its rows over as computed, with no float32 copy); `dtype` is the
    model's precision ("torch.bfloat16" rows upcast losslessly).
    """

    token_ids: list[int]
    rows: Any  # a numpy array
    dtype: str


class EngineRefused(Exception):
    """The engine refused the request's values (a 400 of Inference)."""

    def __init__(self, message: str, param: str | None = None, code: str = "invalid_request") -> None:
        super().__init__(message)
        self.message, self.param, self.code = message, param, code


class EngineOutOfMemory(Exception):
    """The engine ran out of accelerator memory."""


class EngineDead(Exception):
    """The engine's core process stopped; the replica must be replaced."""


class ForwardEngine(abc.ABC):
    """What a harvest's model host needs: prompt-only forward passes."""

    @abc.abstractmethod
    async def forward(self, request: ForwardRequest) -> list[PromptRows]:
        """Run each prompt through the model once and read its residual stream.

        Returns one PromptRows per prompt, in the order of `request.prompts`,
        each with exactly that prompt's tokens as rows (the token at position i
        is row i). Refuses (EngineRefused, before any pass) a Layer the model
        lacks or directions of another width.
        """

    @abc.abstractmethod
    def shutdown(self) -> None:
        """Stop the engine and remove what it made; later calls do nothing."""


class Engine(ForwardEngine):
    """One served model. Every method may raise EngineDead once the engine stopped."""

    @abc.abstractmethod
    async def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of `text`, as the engine itself would read it."""

    @abc.abstractmethod
    def generate(self, request: GenerateRequest) -> AsyncIterator[EngineOutput]:
        """Stream the request's outputs as deltas.

        The last output has `finished=True` and every choice a finish_reason;
        a stream that ends without it was cut. Refusals raise EngineRefused
        before the first output; engine failures raise EngineOutOfMemory or
        EngineDead, at any point.
        """

    @abc.abstractmethod
    async def abort(self, request_id: str) -> None:
        """Stop a running request; its stream ends without `finished`."""

    @abc.abstractmethod
    def state(self) -> EngineState:
        """Whether the engine serves now, and its boot stage while it starts."""

    @abc.abstractmethod
    async def check_health(self) -> None:
        """Return when the engine serves; raise EngineDead when it stopped for good."""
