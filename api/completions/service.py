"""POST /v1/completions: validate, plan, run on the model, answer."""
from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any, AsyncIterator

from fastapi.responses import JSONResponse, StreamingResponse

from api import errors
from api.completions.assembly import CompletionAssembly
from api.completions.planning import plan
from api.completions.request import PlannedRequest
from api.completions.runner import run_outputs
from api.completions.streaming import DONE, spaced_json, sse, with_keepalives
from api.completions.validation import parse_completion_request
from api.inference.gateway import ModelGateway
from api.services import Services

OUTPUT_CAP = 32_000


@dataclass(frozen=True)
class ModelFacts:
    """What planning reads of a model (api.completions.planning.ModelInfo)."""

    id: str
    served_model_name: str
    max_model_len: int
    n_layers: int | None
    hidden_size: int | None
    vocab_size: int | None


def model_facts(model: Any, vocab_size: int | None) -> ModelFacts:
    return ModelFacts(model.id, model.served_model_name, model.max_model_len,
                      model.n_layers, model.hidden_size, vocab_size)


def clamp_header(planned: PlannedRequest, max_model_len: int) -> dict[str, str]:
    """X-Acs-Max-Tokens-Clamped when the default was cut to the non-stream deadline."""
    if not planned.deadline_clamped:
        return {}
    room = max(1, max_model_len - len(planned.prompt_token_ids[0]))
    # The cookbook: "A header with reason=deadline has no source."
    value = f"requested={min(OUTPUT_CAP, room)},applied={planned.max_tokens},reason=deadline"
    return {"X-Acs-Max-Tokens-Clamped": value}


class CompletionService:
    def __init__(self, services: Services) -> None:
        self.services = services
        self.settings = services.settings

    def prepare(self, body: Any) -> tuple[PlannedRequest, Any]:
        request = parse_completion_request(body)
        model = self.services.resolve_model(request.model)
        tokenizer = self.services.tokenizers.get(model)
        facts = model_facts(model, tokenizer.vocab_size)
        planned = plan(request, model=facts, count_tokens=tokenizer.encode)
        return planned, model

    async def create(self, body: Any, request_id: str) -> Any:
        planned, model = self.prepare(body)
        gateway = self.services.gateways[model.id]
        assembly = CompletionAssembly(planned, model.served_model_name, self.services.tokenizers.get(model).decode)
        headers = clamp_header(planned, model.max_model_len)
        if planned.request.stream:
            return await self._stream(assembly, gateway, request_id, headers)
        return await self._complete(assembly, gateway, request_id, headers)

    # -- without a stream -------------------------------------------------------
    async def _collect(self, assembly: CompletionAssembly, gateway: ModelGateway, request_id: str) -> tuple[dict, int]:
        async with gateway.admitted():
            try:
                # Without a stream the whole answer must come within the wait.
                async with asyncio.timeout(self.settings.engine_timeout_s):
                    async for p, output in run_outputs(assembly, gateway, request_id):
                        assembly.add(p, output)
                check_complete(assembly)
            except TimeoutError as timeout:
                error = errors.UpstreamDeadline(errors.DEADLINE_MESSAGE)
                gateway.record(error)
                raise error from timeout
            except errors.ApiError as error:
                gateway.record(error)
                raise
            gateway.record(None)
        return assembly.completion(), 200

    async def _complete(self, assembly: CompletionAssembly, gateway: ModelGateway,
                        request_id: str, headers: dict[str, str]) -> Any:
        task = asyncio.create_task(self._collect(assembly, gateway, request_id))
        done, _ = await asyncio.wait({task}, timeout=self.settings.long_wait_s)
        if done:
            payload, status = task.result()
            return JSONResponse(payload, status_code=status, headers=headers)
        body = spaced_json(task, self.settings.keepalive_s, lambda e: e.body(request_id, in_stream=True))
        return StreamingResponse(body, media_type="application/json", headers=headers)

    # -- with a stream ------------------------------------------------------------
    async def _stream(self, assembly: CompletionAssembly, gateway: ModelGateway,
                      request_id: str, headers: dict[str, str]) -> Any:
        exits = contextlib.AsyncExitStack()
        await exits.enter_async_context(gateway.admitted())
        outputs = run_outputs(assembly, gateway, request_id)
        try:
            # The status goes out only once Inference starts its answer.
            first = await asyncio.wait_for(outputs.__anext__(), self.settings.engine_timeout_s)
        except BaseException as error:
            await outputs.aclose()
            await exits.aclose()
            mapped = error if isinstance(error, errors.ApiError) else _first_failure(error)
            gateway.record(mapped)
            raise mapped from error
        events = self._events(assembly, gateway, first, outputs, request_id, exits)
        body = with_keepalives(events, self.settings.keepalive_s)
        return StreamingResponse(body, media_type="text/event-stream", headers=headers)

    async def _events(self, assembly: CompletionAssembly, gateway: ModelGateway, first: tuple,
                      outputs: AsyncIterator, request_id: str, exits: contextlib.AsyncExitStack) -> AsyncIterator[bytes]:
        request = assembly.planned.request
        try:
            for chunk in self._chunks(assembly, *first):
                yield chunk
            async for p, output in outputs:
                for chunk in self._chunks(assembly, p, output):
                    yield chunk
            check_complete(assembly)
            gateway.record(None)
            if request.include_usage:
                yield sse(assembly.chunk([], assembly.usage()))
        except errors.ApiError as error:
            gateway.record(error)
            yield sse(error.body(request_id, in_stream=True))
        finally:
            await outputs.aclose()
            await exits.aclose()
        yield DONE

    def _chunks(self, assembly: CompletionAssembly, p: int, output: Any) -> list[bytes]:
        continuous = assembly.planned.request.continuous_usage_stats
        out = []
        for choice in assembly.add(p, output):
            usage = choice.pop("_usage")
            if choice["text"] == "" and choice["finish_reason"] is None and choice["logprobs"] is None:
                continue
            out.append(sse(assembly.chunk([choice], usage if continuous else None)))
        return out


def _first_failure(error: BaseException) -> errors.ApiError:
    if isinstance(error, asyncio.TimeoutError):
        return errors.UpstreamDeadline(errors.DEADLINE_MESSAGE)
    from api.inference.gateway import map_failure

    return map_failure(error)


def check_complete(assembly: CompletionAssembly) -> None:
    if not assembly.complete():
        raise errors.UpstreamServerError(errors.ANSWER_MISFIT_PREFIX + "not every choice finished.")
