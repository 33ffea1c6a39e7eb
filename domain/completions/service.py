"""POST /v1/completions: validate, admit (line, Hold), run on the model,
answer, and settle the Hold by the spec's one rule."""
from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, AsyncGenerator, Awaitable, Callable

from domain import errors
from domain.answers import Answer, replayed
from domain.completions.steering import parse_steers
from domain.completions.admission import AdmissionPolicy, Admitted, HoldSink
from domain.completions.answers import StreamAnswer, WholeAnswer
from domain.completions.assembly import CompletionAssembly
from domain.completions.planning import plan
from domain.completions.request import Capture, PlannedRequest
from domain.completions.runner import run_outputs
from domain.completions.validation import parse_completion_request
from domain.inference.gateway import ModelGateway
from domain.services import Services
from domain.timing import stage
from deployments.checks import ModelFacts
from ledger.work.idempotency import Replay, Started
from ledger.tokens.tables import UsageStatus
from ledger.store.survive import survive
from ledger.accounts.keys import Principal

ROUTE = "POST /v1/completions"
# The tasks of Completions without a stream, until each ends: the event loop keeps only a weak
# reference to a task, and one whose client went away runs on.
_running: set[asyncio.Task[Any]] = set()


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


class CompletionService:
    def __init__(self, services: Services) -> None:
        self.services = services
        self.admission = services.admission

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

    async def create(self, body: Any, request_id: str, principal: Principal,
                     idempotency_key: str | None = None) -> Answer | WholeAnswer | StreamAnswer:
        """The Completion's answer (domain/completions/answers.py), or a replayed first answer;
        or raises ApiError before anything was charged."""
        # Tokenizing a large prompt must not stall the other requests' event loop.
        with stage("validate"):
            planned, model = await asyncio.to_thread(self.prepare, body)
        with stage("stop"):
            await self.services.ledger.check_spend_stop()
        claim = await self._claim(principal, idempotency_key, body)
        if isinstance(claim, Replay):
            return replayed(claim)
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
    async def _claim(self, principal: Principal, key: str | None, body: Any) -> Started | Replay | None:
        if key is None:
            return None
        with stage("idempotency"):
            return await self.services.idempotency.start(principal.user_id, key, ROUTE, body)

    async def _free(self, claim: Started | None) -> None:
        if claim is not None:
            await self.services.idempotency.free(claim.record_id)

    # -- background work --------------------------------------------------------
    async def run_in_background(self, body: Any, request_id: str, principal: Principal, policy: AdmissionPolicy,
                                sink: HoldSink) -> dict:
        """One request of background work, without a stream: the Completion, or raises ApiError.

        It holds nothing until it runs; `policy` says how it is admitted and
        how long it waits; `sink` takes its Hold's id and its end.
        """
        planned, model = await asyncio.to_thread(self.prepare, body)
        gateway = self.services.gateways[model.id]
        admitted = await self.admission.admit(planned, model, gateway, request_id, principal, policy, sink)
        return await self._collect(admitted, gateway, request_id)

    async def stream_in_background(self, body: Any, request_id: str, principal: Principal, policy: AdmissionPolicy,
                                   sink: HoldSink, on_progress: OnProgress) -> Grown:
        """One request of background work with a stream (a Loom Node): its text grows while
        Inference writes it. After each output, `on_progress(text, logprobs, used_tokens)` gets
        the choice's text so far, its log probabilities so far (None without `logprobs`) and
        the prompt and generated tokens so far.

        The Hold settles as a stream's does: to Inference's usage at the end, to what was sent
        when the stream breaks (the ApiError is raised after the text before it went to
        `on_progress`), released when nothing came. A cut attempt (CancelledError: a stop, a
        restart, a lost lease) settles nothing: whoever cut it ends the Hold, by a Loom stop's
        or a requeue's rule, in the transaction that changes the work row.
        """
        planned, model = await asyncio.to_thread(self.prepare, body)
        gateway = self.services.gateways[model.id]
        admitted = await self.admission.admit(planned, model, gateway, request_id, principal, policy, sink)
        outputs = run_outputs(admitted.assembly, gateway, request_id, admitted.waits)
        try:
            return await self._grow(admitted, outputs, on_progress)
        finally:
            await survive(self._close_outputs(admitted, outputs))

    @staticmethod
    async def _grow(admitted: Admitted, outputs: AsyncGenerator, on_progress: OnProgress) -> Grown:
        assembly = admitted.assembly
        growth = _Growth()

        async def grew(choices: list[dict[str, Any]]) -> None:
            growth.add(choices)
            await on_progress(growth.text, growth.logprobs, assembly.usage()["total_tokens"])

        usage = await _run_to_end(admitted, outputs, grew)
        (choice,) = assembly.completion()["choices"]
        return Grown(choice["text"], choice["logprobs"], usage)

    async def stream_completion_in_background(self, body: Any, request_id: str, principal: Principal,
                                              policy: AdmissionPolicy, sink: HoldSink,
                                              on_progress: OnAssembly) -> dict[str, Any]:
        """One request of background work with a stream, kept whole (a Playground Run): every
        prompt and choice, log probabilities and Activations. After each output
        `on_progress(assembly, choices)` gets the Completion so far (`CompletionAssembly.completion()`,
        `.usage()`) and the output's stream chunk choices (each choice's new text, by its index);
        the answer is the whole Completion, with its Activations when asked.

        The Hold settles as `stream_in_background`'s does: to Inference's usage at the end, to
        what was sent when the stream breaks (the ApiError is raised after the last output went
        to `on_progress`), released when nothing came; a cut attempt settles nothing."""
        planned, model = await asyncio.to_thread(self.prepare, body)
        gateway = self.services.gateways[model.id]
        admitted = await self.admission.admit(planned, model, gateway, request_id, principal, policy, sink)
        outputs = run_outputs(admitted.assembly, gateway, request_id, admitted.waits)

        async def grew(choices: list[dict[str, Any]]) -> None:
            await on_progress(admitted.assembly, choices)

        try:
            await on_progress(admitted.assembly, [])  # admitted: the Completion's id is known, no text yet
            await _run_to_end(admitted, outputs, grew)
            return admitted.assembly.completion()
        finally:
            await survive(self._close_outputs(admitted, outputs))

    @staticmethod
    async def _close_outputs(admitted: Admitted, outputs: AsyncGenerator) -> None:
        """Stop the engine and free the places."""
        await outputs.aclose()
        await admitted.exits.aclose()

    # -- without a stream -------------------------------------------------------
    async def _collect(self, admitted: Admitted, gateway: ModelGateway, request_id: str) -> dict:
        assembly, settlement = admitted.assembly, admitted.settlement
        try:
            with stage("engine"):
                async for p, output in run_outputs(assembly, gateway, request_id, admitted.waits):
                    with stage("assemble"):
                        assembly.add(p, output)
            check_complete(assembly)
            assembly.check_activations()
        except asyncio.CancelledError:
            await settlement.whole()
            raise
        except BaseException:
            await settlement.release()
            raise
        finally:
            await admitted.exits.aclose()
        with stage("settle"):
            await settlement.reported(assembly.usage()["total_tokens"])
        with stage("serialize"):
            return assembly.completion()

    async def _answer(self, admitted: Admitted, gateway: ModelGateway, request_id: str,
                      claim: Started | None) -> dict:
        try:
            payload = await self._collect(admitted, gateway, request_id)
        except BaseException:
            await self._free(claim)
            raise
        if claim is not None:
            # Recorded here, not in the route: after 150 s the answer is a spaced body.
            await self.services.idempotency.answered(claim.record_id, 200, payload, admitted.headers)
        return payload

    async def _complete(self, planned: PlannedRequest, model: Any, gateway: ModelGateway,
                        request_id: str, principal: Principal, claim: Started | None) -> WholeAnswer:
        # The long wait counts from the request's start, the wait for a place included.
        started = asyncio.get_running_loop().time()
        admitted = await self.admission.admit(planned, model, gateway, request_id, principal)
        # A request without a stream runs on when its client goes away, and pays only for
        # its usage: its task is kept here, not by whoever waits for it.
        task = asyncio.create_task(self._answer(admitted, gateway, request_id, claim))
        _running.add(task)
        task.add_done_callback(_running.discard)
        return WholeAnswer(task, admitted.headers, started)

    # -- with a stream ------------------------------------------------------------
    async def _stream(self, planned: PlannedRequest, model: Any, gateway: ModelGateway,
                      request_id: str, principal: Principal, claim: Started | None) -> StreamAnswer:
        admitted = await self.admission.admit(planned, model, gateway, request_id, principal)
        outputs = run_outputs(admitted.assembly, gateway, request_id, admitted.waits)
        try:
            # The status goes out only once Inference starts its answer.
            with stage("engine"):
                first = await outputs.__anext__()
        except BaseException:
            await outputs.aclose()
            await admitted.exits.aclose()
            await admitted.settlement.release()
            raise
        if claim is not None:
            # A stream runs once: its repeat gets 409 no_answer.
            await self.services.idempotency.streamed(claim.record_id)
        return StreamAnswer(admitted.headers, self._documents(admitted, first, outputs, request_id))

    async def _documents(self, admitted: Admitted, first: tuple, outputs: AsyncGenerator,
                         request_id: str) -> AsyncGenerator[dict[str, Any], None]:
        assembly, settlement = admitted.assembly, admitted.settlement
        try:
            for chunk in self._chunks(assembly, *first):
                yield chunk
            async for p, output in outputs:
                for chunk in self._chunks(assembly, p, output):
                    yield chunk
            check_complete(assembly)
            activations = assembly.check_activations()
            await settlement.reported(assembly.usage()["total_tokens"])
            if assembly.planned.request.include_usage:
                yield assembly.chunk([], assembly.usage())
            if activations is not None:
                # Inference's streams never carry them: the API adds a last chunk of their own.
                yield {**assembly.chunk([]), "activations": activations}
        except errors.ApiError as error:
            await settlement.partial(assembly.usage()["total_tokens"], UsageStatus.failed)
            yield error.body(request_id, in_stream=True)
        finally:
            await survive(self._close_stream(admitted, outputs))

    @staticmethod
    async def _close_stream(admitted: Admitted, outputs: AsyncGenerator) -> None:
        """Stop the engine, free the places, and (the client closed it) pay for what was sent."""
        await outputs.aclose()
        await admitted.exits.aclose()
        sent = admitted.assembly.usage()["total_tokens"]
        await admitted.settlement.partial(sent, UsageStatus.stopped)

    def _chunks(self, assembly: CompletionAssembly, p: int, output: Any) -> list[dict[str, Any]]:
        continuous = assembly.planned.request.continuous_usage_stats
        out = []
        for choice in assembly.add(p, output):
            usage = choice.pop("_usage")
            if choice["text"] == "" and choice["finish_reason"] is None and choice["logprobs"] is None:
                continue
            out.append(assembly.chunk([choice], usage if continuous else None))
        return out


OnProgress = Callable[[str, "dict | None", int], Awaitable[None]]
OnAssembly = Callable[[CompletionAssembly, list[dict[str, Any]]], Awaitable[None]]


async def _run_to_end(admitted: Admitted, outputs: AsyncGenerator,
                      grew: Callable[[list[dict[str, Any]]], Awaitable[None]]) -> dict[str, int]:
    """Feed a background stream's outputs to its assembly, `grew(chunk choices)` after each, until
    every choice finished and its Activations (when asked) fit; then settle its Hold as a stream's
    and return the usage. A refusal or a failure (ApiError) pays what was sent, or nothing before a
    token; the API's own failure costs nothing; a cut (CancelledError) settles nothing: whoever
    cut it ends the Hold."""
    assembly, settlement = admitted.assembly, admitted.settlement
    try:
        async for p, output in outputs:
            await grew(assembly.add(p, output))
        check_complete(assembly)
        assembly.check_activations()
    except errors.ApiError:
        sent = sent_tokens(assembly)
        if sent:
            await settlement.partial(sent, UsageStatus.failed)
        else:  # refused, or failed before a token
            await settlement.release()
        raise
    except asyncio.CancelledError:
        raise
    except BaseException:
        await settlement.release()  # the API's own failure costs nothing
        raise
    usage = assembly.usage()
    await settlement.reported(usage["total_tokens"])
    return usage


def sent_tokens(assembly: CompletionAssembly) -> int:
    """What a background stream that Inference refused or failed pays (`_run_to_end`): the prompt
    and generated tokens that it sent, or 0 before its first token, when its Hold is released.
    The work that shows what it cost (a Run's `used_tokens`) shows this, not the usage's total,
    which counts the prompt's tokens from the start."""
    return assembly.usage()["total_tokens"] if assembly.completion_tokens() else 0


@dataclasses.dataclass(frozen=True)
class Grown:
    """A background stream's answer: the text, its log probabilities (text_offset counted
    within the text, from 0; None without `logprobs`) and the usage."""

    text: str
    logprobs: dict | None
    usage: dict[str, int]


class _Growth:
    """One choice's text and log probabilities so far, from its stream chunks."""

    def __init__(self) -> None:
        self.text, self.logprobs = "", None

    def add(self, choices: list[dict[str, Any]]) -> None:
        for choice in choices:
            self.text += choice["text"]
            if choice["logprobs"] is not None:
                if self.logprobs is None:
                    self.logprobs = {key: [] for key in choice["logprobs"]}
                for key, values in choice["logprobs"].items():
                    self.logprobs[key].extend(values)


def check_complete(assembly: CompletionAssembly) -> None:
    if not assembly.complete():
        raise errors.UpstreamServerError(errors.ANSWER_MISFIT_PREFIX + "not every choice finished.")
