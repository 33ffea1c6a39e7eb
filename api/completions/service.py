"""POST /v1/completions: validate, admit (line, Hold), run on the model,
answer, and settle the Hold by the spec's one rule."""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable

from fastapi.responses import JSONResponse, StreamingResponse

from api import errors
from api.activations.steering import parse_steers
from api.budget import clamp_value
from api.completions.assembly import CompletionAssembly
from api.completions.planning import ModelFacts, plan
from api.completions.request import Capture, PlannedRequest
from api.completions.runner import run_outputs
from api.completions.settlement import Settlement
from api.completions.streaming import DONE, spaced_json, sse, with_keepalives
from api.completions.validation import parse_completion_request
from api.idempotency import replay_response
from api.inference.gateway import ModelGateway, map_failure
from api.services import Services
from api.survive import survive
from ledger.idempotency import Replay, Started
from ledger.models import UsageSource, UsageStatus
from ledger.tokens import HoldAsk

OnHold = Callable[[Any], Awaitable[None]]

OUTPUT_CAP = 32_000
ROUTE = "POST /v1/completions"


def model_facts(model: Any, vocab_size: int | None) -> ModelFacts:
    return ModelFacts(model.id, model.served_model_name, model.max_model_len,
                      model.n_layers, model.hidden_size, vocab_size)


def capture_of(request: Any, model: Any) -> Capture | None:
    """The Layers of output_residual_stream: `true` is every Layer, spelled out, because
    vllm-lens reads any value but None (False too) as every Layer."""
    layers = request.output_residual_stream
    if layers is None:
        return None
    layers = list(range(model.n_layers)) if layers is True else sorted(set(layers))
    return Capture(layers, model.hidden_size)


@dataclass(frozen=True)
class Admission:
    """How a request gets its places and its Hold: POST /v1/completions, or background work."""

    source: UsageSource = UsageSource.api
    # Only POST /v1/completions lowers max_tokens near the end of the tokens.
    may_lower: bool = True
    # Background work takes no place in the key's line ...
    key_line: bool = True
    # ... and waits for a place at the model, where a request gets 503.
    wait_for_model: bool = False


FOREGROUND = Admission()
JOB = Admission(source=UsageSource.job, may_lower=False, key_line=False, wait_for_model=True)


def hold_ask(planned: PlannedRequest, principal: Any, model_id: str, request_id: str,
             admission: Admission = FOREGROUND) -> HoldAsk:
    r = planned.request
    return HoldAsk(
        user_id=principal.user_id, key_id=principal.key_id, model=model_id,
        prompt_tokens=sum(len(ids) for ids in planned.prompt_token_ids),
        choices=len(planned.prompt_token_ids) * r.n, max_tokens=planned.max_tokens,
        may_lower=admission.may_lower, source=admission.source, request_id=request_id,
    )


def clamp_header(planned: PlannedRequest, applied: int, max_model_len: int) -> dict[str, str]:
    """X-Acs-Max-Tokens-Clamped when the deadline or the Budget lowered max_tokens."""
    budget = applied < planned.max_tokens
    if planned.deadline_clamped and not budget:
        requested = min(OUTPUT_CAP, max(1, max_model_len - len(planned.prompt_token_ids[0])))
    else:
        requested = planned.max_tokens
    value = clamp_value(requested, applied, budget=budget, deadline=planned.deadline_clamped,
                        source=planned.max_tokens_source)
    return {"X-Acs-Max-Tokens-Clamped": value} if value else {}


@dataclass
class Admitted:
    """A request with its place in the key's line and its Hold."""

    assembly: CompletionAssembly
    settlement: Settlement
    headers: dict[str, str]
    exits: contextlib.AsyncExitStack


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
        steering = None
        if request.apply_steering_vectors:
            prompt_tokens = len(planned.prompt_token_ids[0])  # steering is for one prompt
            steering = parse_steers(request.apply_steering_vectors, facts, prompt_tokens, planned.max_tokens)
        return dataclasses.replace(planned, capture=capture_of(request, model), steering=steering), model

    async def create(self, body: Any, request_id: str, principal: Any, idempotency_key: str | None = None) -> Any:
        # Tokenizing a large prompt must not stall the other requests' event loop.
        planned, model = await asyncio.to_thread(self.prepare, body)
        await self.services.ledger.check_spend_stop()
        claim = await self._claim(principal, idempotency_key, body)
        if isinstance(claim, Replay):
            return replay_response(claim)
        gateway = self.services.gateways[model.id]
        try:
            if planned.request.stream:
                return await self._stream(planned, model, gateway, request_id, principal, claim)
            return await self._complete(planned, model, gateway, request_id, principal, claim)
        except BaseException:
            # Failed before it was charged (the Hold released or never taken): the key is free.
            await self._free(claim)
            raise

    # -- Idempotency-Key ------------------------------------------------------------
    async def _claim(self, principal: Any, key: str | None, body: Any) -> Started | Replay | None:
        if key is None:
            return None
        return await self.services.idempotency.start(principal.user_id, key, ROUTE, body)

    async def _free(self, claim: Started | None) -> None:
        if claim is not None:
            await self.services.idempotency.free(claim.record_id)

    # -- admission: the key's line, then the Hold ----------------------------------
    async def _admit(self, planned: PlannedRequest, model: Any, gateway: ModelGateway, request_id: str,
                     principal: Any, admission: Admission = FOREGROUND, on_hold: OnHold | None = None,
                     ends: Any = None) -> Admitted:
        """`on_hold` learns the Hold's id before the request runs; `ends` is where
        the Hold's end goes (the ledger, or background work's own record)."""
        exits = contextlib.AsyncExitStack()
        try:
            if admission.key_line:
                # A waiting request holds no tokens: the Hold comes once it has a place.
                await exits.enter_async_context(self.services.traffic.line(str(principal.key_id)))
            await exits.enter_async_context(gateway.admitted(wait=admission.wait_for_model))
            held = await self.services.ledger.hold(hold_ask(planned, principal, model.id, request_id, admission))
            if on_hold is not None:
                await _released_on_failure(self.services.ledger, held.hold_id, on_hold(held.hold_id))
        except BaseException:
            await exits.aclose()
            raise
        headers = clamp_header(planned, held.max_tokens, model.max_model_len)
        planned = dataclasses.replace(planned, max_tokens=held.max_tokens)
        tokenizer = self.services.tokenizers.get(model)
        assembly = CompletionAssembly(planned, model.served_model_name, tokenizer.decode)
        settlement = Settlement(ends or self.services.ledger, held.hold_id, held.tokens)
        return Admitted(assembly, settlement, headers, exits)

    # -- background work --------------------------------------------------------
    async def run_in_background(self, body: Any, request_id: str, principal: Any, admission: Admission,
                                on_hold: OnHold, ends: Any, timeout_s: float) -> dict:
        """One request of background work, without a stream: the Completion, or raises ApiError.

        It holds nothing until it runs, never lowers max_tokens, takes no
        place in the key's line, and waits for a place at the model.
        """
        planned, model = await asyncio.to_thread(self.prepare, body)
        gateway = self.services.gateways[model.id]
        admitted = await self._admit(planned, model, gateway, request_id, principal, admission, on_hold, ends)
        return await self._collect(admitted, gateway, request_id, timeout_s)

    # -- without a stream -------------------------------------------------------
    async def _collect(self, admitted: Admitted, gateway: ModelGateway, request_id: str,
                       timeout_s: float | None = None) -> dict:
        assembly, settlement = admitted.assembly, admitted.settlement
        try:
            # Without a stream the whole answer must come within the wait.
            async with asyncio.timeout(timeout_s or self.settings.engine_timeout_s):
                async for p, output in run_outputs(assembly, gateway, request_id):
                    assembly.add(p, output)
            check_complete(assembly)
            assembly.check_activations()
        except TimeoutError as timeout:
            error = errors.UpstreamDeadline(errors.DEADLINE_MESSAGE)
            gateway.record(error)
            await settlement.release()
            raise error from timeout
        except errors.ApiError as error:
            gateway.record(error)
            await settlement.release()
            raise
        except asyncio.CancelledError:
            await settlement.whole()
            raise
        except BaseException:
            await settlement.release()
            raise
        finally:
            await admitted.exits.aclose()
        gateway.record(None)
        await settlement.reported(assembly.usage()["total_tokens"])
        return assembly.completion()

    async def _answer(self, planned: PlannedRequest, model: Any, gateway: ModelGateway,
                      request_id: str, principal: Any, claim: Started | None) -> tuple[dict, dict[str, str]]:
        try:
            admitted = await self._admit(planned, model, gateway, request_id, principal)
            payload = await self._collect(admitted, gateway, request_id)
        except BaseException:
            await self._free(claim)
            raise
        if claim is not None:
            # Recorded here, not in the route: after 150 s the answer is a spaced body.
            await self.services.idempotency.answered(claim.record_id, 200, payload, admitted.headers)
        return payload, admitted.headers

    async def _complete(self, planned: PlannedRequest, model: Any, gateway: ModelGateway,
                        request_id: str, principal: Any, claim: Started | None) -> Any:
        task = asyncio.create_task(self._answer(planned, model, gateway, request_id, principal, claim))
        done, _ = await asyncio.wait({task}, timeout=self.settings.long_wait_s)
        if done:
            payload, headers = task.result()
            return JSONResponse(payload, headers=headers)
        # A request without a stream runs on when its client goes away (shield),
        # and pays only for its usage.
        body = spaced_json(asyncio.shield(task), self.settings.keepalive_s,
                           lambda e: e.body(request_id, in_stream=True))
        return StreamingResponse(body, media_type="application/json")

    # -- with a stream ------------------------------------------------------------
    async def _stream(self, planned: PlannedRequest, model: Any, gateway: ModelGateway,
                      request_id: str, principal: Any, claim: Started | None) -> Any:
        admitted = await self._admit(planned, model, gateway, request_id, principal)
        outputs = run_outputs(admitted.assembly, gateway, request_id)
        try:
            # The status goes out only once Inference starts its answer.
            first = await asyncio.wait_for(outputs.__anext__(), self.settings.engine_timeout_s)
        except BaseException as error:
            await outputs.aclose()
            await admitted.exits.aclose()
            await admitted.settlement.release()
            if isinstance(error, asyncio.CancelledError):
                raise
            mapped = _first_failure(error)
            gateway.record(mapped)
            raise mapped from error
        if claim is not None:
            # A stream runs once: its repeat gets 409 no_answer.
            await self.services.idempotency.streamed(claim.record_id)
        events = self._events(admitted, gateway, first, outputs, request_id)
        body = with_keepalives(events, self.settings.keepalive_s)
        return StreamingResponse(body, media_type="text/event-stream", headers=admitted.headers)

    async def _events(self, admitted: Admitted, gateway: ModelGateway, first: tuple,
                      outputs: AsyncIterator, request_id: str) -> AsyncIterator[bytes]:
        assembly, settlement = admitted.assembly, admitted.settlement
        try:
            for chunk in self._chunks(assembly, *first):
                yield chunk
            async for p, output in outputs:
                for chunk in self._chunks(assembly, p, output):
                    yield chunk
            check_complete(assembly)
            activations = assembly.check_activations()
            gateway.record(None)
            await settlement.reported(assembly.usage()["total_tokens"])
            if assembly.planned.request.include_usage:
                yield sse(assembly.chunk([], assembly.usage()))
            if activations is not None:
                # Inference's streams never carry them: the API adds a last chunk of their own.
                yield sse({**assembly.chunk([]), "activations": activations})
        except errors.ApiError as error:
            gateway.record(error)
            await settlement.partial(assembly.usage()["total_tokens"], UsageStatus.failed)
            yield sse(error.body(request_id, in_stream=True))
        finally:
            await survive(self._close_stream(admitted, outputs))
        yield DONE

    @staticmethod
    async def _close_stream(admitted: Admitted, outputs: AsyncIterator) -> None:
        """Stop the engine, free the places, and (the client closed it) pay for what was sent."""
        await outputs.aclose()
        await admitted.exits.aclose()
        sent = admitted.assembly.usage()["total_tokens"]
        await admitted.settlement.partial(sent, UsageStatus.stopped)

    def _chunks(self, assembly: CompletionAssembly, p: int, output: Any) -> list[bytes]:
        continuous = assembly.planned.request.continuous_usage_stats
        out = []
        for choice in assembly.add(p, output):
            usage = choice.pop("_usage")
            if choice["text"] == "" and choice["finish_reason"] is None and choice["logprobs"] is None:
                continue
            out.append(sse(assembly.chunk([choice], usage if continuous else None)))
        return out


async def _released_on_failure(ledger: Any, hold_id: Any, step: Any) -> None:
    try:
        await step
    except BaseException:
        await ledger.end(hold_id, None, None, UsageStatus.failed)
        raise


def _first_failure(error: BaseException) -> errors.ApiError:
    if isinstance(error, errors.ApiError):
        return error
    if isinstance(error, asyncio.TimeoutError):
        return errors.UpstreamDeadline(errors.DEADLINE_MESSAGE)
    return map_failure(error)


def check_complete(assembly: CompletionAssembly) -> None:
    if not assembly.complete():
        raise errors.UpstreamServerError(errors.ANSWER_MISFIT_PREFIX + "not every choice finished.")
