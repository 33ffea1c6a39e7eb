"""The real engine: vLLM's AsyncLLM with the vllm-lens plugin.

vllm-lens registers itself as a `vllm.general_plugins` entry point, which
vLLM loads when the engine is built; `lens_loaded()` checks that it did.
"""
from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable

import numpy as np

from deployments.engine import (
    ChoiceDelta, Engine, EngineDead, EngineOutOfMemory, EngineOutput, EngineRefused, EngineState, ForwardRequest,
    GenerateRequest, PositionLogprobs, PromptRows, SamplingSpec, Steer, TokenLogprob,
)
from deployments.engine_stages import StageWatcher
from deployments.lens_checks import check_forward_request, check_lens_request, engine_facts
from deployments.vllm_runtime import prepare_environment, project_temp_files

if TYPE_CHECKING:  # vLLM loads only where an engine is built
    from vllm.v1.engine.async_llm import AsyncLLM


def build_engine_args(weights: str, engine: dict[str, Any], cpu: bool) -> Any:
    from vllm.engine.arg_utils import AsyncEngineArgs

    args = dict(engine)
    args.setdefault("max_logprobs", -1)  # prompt_logprobs -1 asks for the whole vocabulary
    args.setdefault("scheduling_policy", "priority")  # the spec's `priority` field
    # vllm-lens's extension, with our fixes of its traps and the reports of the start
    # (deployments/worker_extension.py).
    args.setdefault("worker_extension_cls", "deployments.worker_extension.WorkerExtension")
    if cpu:
        args.setdefault("distributed_executor_backend", "uni")
    args["tensor_parallel_size"] = args.get("tensor_parallel_size", 1)
    return AsyncEngineArgs(model=weights, tokenizer=weights, **args)


def output_kind(spec: SamplingSpec) -> Any:
    from vllm.sampling_params import RequestOutputKind

    if spec.final_only:
        return RequestOutputKind.FINAL_ONLY
    # vllm-lens trap: it trims a capture to prompt + len(last output's tokens) - 1
    # rows, which with DELTA outputs drops every generated row but one. A streamed
    # capture runs CUMULATIVE, and `Deltas` turns it back into deltas.
    return RequestOutputKind.CUMULATIVE if spec.capture_layers else RequestOutputKind.DELTA


def to_sampling_params(spec: SamplingSpec) -> Any:
    from vllm import SamplingParams

    # A fresh SamplingParams per request: vllm-lens mutates the one it gets.
    extra_args: dict[str, Any] = {}
    if spec.capture_layers:
        extra_args["output_residual_stream"] = list(spec.capture_layers)
    if spec.steering:
        extra_args["apply_steering_vectors"] = [steering_vector(steer) for steer in spec.steering]
    return SamplingParams(
        extra_args=extra_args or None,
        n=spec.n, max_tokens=spec.max_tokens, temperature=spec.temperature,
        top_p=spec.top_p, top_k=spec.top_k, min_p=spec.min_p,
        presence_penalty=spec.presence_penalty, frequency_penalty=spec.frequency_penalty,
        repetition_penalty=spec.repetition_penalty, seed=spec.seed, stop=list(spec.stop) or None,
        logprobs=spec.logprobs, prompt_logprobs=spec.prompt_logprobs,
        output_kind=output_kind(spec), skip_special_tokens=True,
    )


def steering_vector(steer: Steer) -> Any:
    """vllm-lens's SteeringVector, built in this process (tensors cannot cross msgspec).

    vllm-lens trap: a 2-D vector with position_indices ignores the positions;
    the API sends positions only with 3-D rows, one vector per position.
    """
    import torch
    from vllm_lens._helpers.types import SteeringVector

    return SteeringVector(activations=torch.from_numpy(np.ascontiguousarray(steer.rows, dtype=np.float32)),
                          layer_indices=list(steer.layer_indices), scale=steer.scale,
                          norm_match=steer.norm_match, position_indices=steer.positions)


def _position(position: Any) -> PositionLogprobs:
    """One position's logprobs: each sampled token has them (vLLM's SampleLogprobs)."""
    return {
        int(token_id): TokenLogprob(float(lp.logprob), lp.rank, lp.decoded_token)
        for token_id, lp in position.items()
    }


def _prompt_position(position: Any) -> PositionLogprobs | None:
    """The prompt's first token has no logprobs (vLLM's PromptLogprobs): None."""
    return None if position is None else _position(position)


class Deltas:
    """What each choice of a CUMULATIVE stream added since its last output."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[int, int]] = {}  # index -> (characters, tokens)

    def choice(self, c: Any) -> ChoiceDelta:
        chars, tokens = self.seen.get(c.index, (0, 0))
        self.seen[c.index] = (len(c.text), len(c.token_ids))
        logprobs = None if c.logprobs is None else [_position(p) for p in list(c.logprobs)[tokens:]]
        return ChoiceDelta(index=c.index, text=c.text[chars:], token_ids=list(c.token_ids)[tokens:],
                           logprobs=logprobs, finish_reason=c.finish_reason, stop_reason=c.stop_reason)


def to_engine_output(out: Any, first: bool, deltas: Deltas | None = None) -> EngineOutput:
    # DELTA and FINAL_ONLY outputs are deltas already; CUMULATIVE ones go through `deltas`.
    deltas = deltas or Deltas()
    choices = [deltas.choice(c) for c in out.outputs]
    prompt_logprobs = None
    if first and out.prompt_logprobs is not None:
        prompt_logprobs = [_prompt_position(p) for p in out.prompt_logprobs]
    return EngineOutput(
        request_id=out.request_id, prompt_token_ids=list(out.prompt_token_ids or []),
        choices=choices, finished=bool(out.finished), prompt_logprobs=prompt_logprobs,
        activations=encoded_activations(getattr(out, "activations", None)),
    )


def encoded_activations(activations: Any) -> dict | None:
    """vllm-lens's torch tensor, encoded here so only compact bytes cross to the API."""
    if not activations or activations.get("residual_stream") is None:
        return None
    from deployments.tensor_codec import encode_torch

    return {"residual_stream": encode_torch(activations["residual_stream"])}


def project(stream: Any, directions: Any) -> np.ndarray:
    """Float32 rows [layers, tokens, hidden], or their projections [layers, tokens, k]."""
    import torch

    rows = stream.detach().to(device="cpu", dtype=torch.float32)
    if directions is not None:
        rows = rows @ torch.from_numpy(np.ascontiguousarray(directions, dtype=np.float32)).T
    return rows.numpy()


def classify_failure(error: BaseException) -> Exception:
    """Map vLLM's exceptions onto the engine boundary's three kinds."""
    from vllm.exceptions import VLLMClientError, VLLMValidationError
    from vllm.v1.engine.exceptions import EngineDeadError

    if isinstance(error, EngineDeadError):
        return EngineDead(str(error))
    if isinstance(error, VLLMValidationError):
        return EngineRefused(super(VLLMValidationError, error).__str__(), error.parameter)
    if isinstance(error, VLLMClientError):
        return EngineRefused(str(error))
    if isinstance(error, ValueError):
        # vLLM's own check of a request that its typed errors do not cover: the request's fault,
        # which the spec passes on as vllm_invalid_request.
        return EngineRefused(str(error), code="vllm_invalid_request")
    if "out of memory" in str(error).lower():
        return EngineOutOfMemory(str(error))
    return error if isinstance(error, Exception) else RuntimeError(str(error))


class OutputClock:
    """The engine's figures for domain/timing.py, on the first and the last output only.

    queue, prefill and decode come from vLLM's RequestStateStats (`RequestOutput.metrics`,
    EngineCore monotonic timestamps); without them (stats off) from this wrapper's
    clock: prefill = to the first output (the queue in it), decode = the rest.
    """

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.first_at: float | None = None

    def timing(self, out: Any, first: bool) -> dict[str, float] | None:
        now = time.perf_counter()
        if first:
            self.first_at = now
        if not (first or out.finished):
            return None
        timing = {"vllm": now - self.started}
        stats = getattr(out, "metrics", None)
        if stats is not None and getattr(stats, "scheduled_ts", 0.0) and getattr(stats, "first_token_ts", 0.0):
            timing["queue"] = max(stats.scheduled_ts - stats.queued_ts, 0.0) if stats.queued_ts else 0.0
            timing["prefill"] = max(stats.first_token_ts - stats.scheduled_ts, 0.0)
            if out.finished:
                timing["decode"] = max(stats.last_token_ts - stats.first_token_ts, 0.0)
        else:
            timing["prefill"] = (self.first_at or now) - self.started
            if out.finished:
                timing["decode"] = now - (self.first_at or now)
        return timing


class VllmEngine(Engine):
    def __init__(self, weights: str, engine_args: dict[str, Any], cpu: bool = True,
                 on_stage: Callable[[str], None] | None = None) -> None:
        """`on_stage` hears the start's stages from the engine's workers (weights_loading,
        weights_loaded) while this constructor waits for the engine."""
        prepare_environment(cpu)
        from vllm.v1.engine.async_llm import AsyncLLM

        self._started_at = time.time()
        stages = StageWatcher(on_stage or (lambda stage: None))
        # No local names the engine: this frame can outlive the constructor (a kept traceback of an
        # import made while the engine started links to it), and shutdown drops the last reference.
        with project_temp_files() as self._temp_files, stages.watching():
            self._llm: AsyncLLM | None = AsyncLLM.from_engine_args(build_engine_args(weights, engine_args, cpu))
        self._tokenizer = self._llm.get_tokenizer()
        self._facts = engine_facts(self._llm.model_config)

    @property
    def llm(self) -> Any:
        return self._llm

    def _live(self) -> AsyncLLM:
        """vLLM's engine, until shutdown."""
        if self._llm is None:
            raise EngineDead("the engine was shut down")
        return self._llm

    async def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=add_special_tokens))

    async def generate(self, request: GenerateRequest) -> AsyncIterator[EngineOutput]:
        first, deltas = True, Deltas()
        clock = OutputClock()
        async for out in self._outputs(request):
            output = to_engine_output(out, first, deltas if request.sampling.capture_layers else None)
            output.timing = clock.timing(out, first)
            yield output
            first = False

    async def forward(self, request: ForwardRequest) -> list[PromptRows]:
        check_forward_request(request, self._facts)
        # vllm-lens trap: with several prompts in one request only the first is
        # captured, so each prompt is a request of its own; vLLM batches them.
        return list(await asyncio.gather(*(
            self._forward_one(f"{request.request_id}-{i}", ids, request)
            for i, ids in enumerate(request.prompts))))

    async def _forward_one(self, request_id: str, token_ids: list[int], request: ForwardRequest) -> PromptRows:
        # One generated token whose own pass never runs: the capture is the prompt's rows.
        spec = SamplingSpec(max_tokens=1, temperature=0.0, final_only=True, capture_layers=list(request.layers))
        last = None
        async for out in self._outputs(GenerateRequest(request_id, list(token_ids), spec)):
            last = out
        stream = (getattr(last, "activations", None) or {}).get("residual_stream")
        if stream is None or tuple(stream.shape[:2]) != (len(request.layers), len(token_ids)):
            shape = None if stream is None else tuple(stream.shape)
            raise RuntimeError(f"vllm-lens captured {shape} for {len(request.layers)} Layers of "
                               f"{len(token_ids)} tokens")
        return PromptRows(list(token_ids), project(stream, request.directions), str(stream.dtype))

    async def _outputs(self, request: GenerateRequest) -> AsyncIterator[Any]:
        """vLLM's own outputs of one request, its failures classified."""
        from vllm.inputs import TokensPrompt

        check_lens_request(request, self._facts)
        prompt = TokensPrompt(prompt_token_ids=list(request.prompt_token_ids))
        if request.sampling.steering:
            # vllm-lens trap: a steered request skips reading the prefix cache but still
            # writes its (steered) blocks there; a salt of its own keeps them out of
            # every other request's reach.
            prompt["cache_salt"] = f"steered-{request.request_id}"
        try:
            # SamplingParams checks its values as it is built: its refusals are classified too.
            stream = self._live().generate(
                prompt,
                to_sampling_params(request.sampling), request.request_id,
                priority=request.sampling.priority,
            )
            async for out in stream:
                yield out
        except (EngineRefused, EngineDead, EngineOutOfMemory):
            raise
        except Exception as error:  # noqa: BLE001 - classified, then re-raised
            raise classify_failure(error) from error

    async def abort(self, request_id: str) -> None:
        await self._live().abort(request_id)

    def state(self) -> EngineState:
        if self._live().errored:
            return EngineState(ready=False, stage=None)
        return EngineState(ready=True)

    async def check_health(self) -> None:
        llm = self._live()
        if llm.errored:
            raise EngineDead(str(llm.dead_error))
        await llm.check_health()

    def shutdown(self) -> None:
        # Drop the engine now: its __del__ shuts down again, and at interpreter
        # exit that finds vLLM's module globals already gone.
        llm, self._llm = self._llm, None
        if llm is not None:
            llm.shutdown()
            del llm
        for path in self._temp_files:
            path.unlink(missing_ok=True)


def lens_loaded() -> bool:
    """True when vllm-lens has patched AsyncLLM.generate in this process."""
    try:
        from vllm_lens import _activations_plugin
    except ImportError:
        return False
    return _activations_plugin._original_generate is not None
