"""Admission of a planned Completion: its place in the key's line, its place
at the model, its Hold, and the header that says max_tokens was lowered.

Foreground requests (POST /v1/completions) and background work (Jobs, Loom
Nodes, Playground Runs) differ only in their `AdmissionPolicy`.
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Protocol

from domain.budget import clamp_value
from domain.completions.assembly import CompletionAssembly
from domain.completions.request import PlannedRequest
from domain.completions.settlement import Settlement
from domain.error_mapping import key_refusal_error
from domain.inference.gateway import ModelGateway, Waits
from domain.timing import stage
from ledger.errors import KeyRefused
from ledger.accounts.keys import Principal, recheck
from ledger.tokens.tables import Counting, UsageSource, UsageStatus
from ledger.tokens.holds import HoldAsk

OUTPUT_CAP = 32_000
# A request that waited in the key's line longer than this has its key read
# again: a revoke, a pause or a suspension while it waited fails it with its 401.
RECHECK_AFTER_WAIT_S = 0.05


@dataclass(frozen=True)
class AdmissionPolicy:
    """How a request gets its places, its Hold and its waits."""

    source: UsageSource = UsageSource.api
    # Only POST /v1/completions lowers max_tokens near the end of the tokens.
    may_lower: bool = True
    # Background work takes no place in the key's line ...
    key_line: bool = True
    # ... and waits for a place at the model, where a request gets 503.
    wait_for_model: bool = False
    # How long Inference's answer may take to start; None: the API's wait (14 minutes).
    answer_wait_s: float | None = None


FOREGROUND = AdmissionPolicy()


def background(source: UsageSource, answer_wait_s: float) -> AdmissionPolicy:
    """Jobs, Loom Nodes and Playground Runs: no line, a wait for the model, never lowered."""
    return AdmissionPolicy(source=source, may_lower=False, key_line=False, wait_for_model=True,
                           answer_wait_s=answer_wait_s)


class HoldSink(Protocol):
    """Where a Hold's id and its end go: the ledger (foreground), or a
    background attempt that writes the end with its result."""

    async def attach(self, hold_id: uuid.UUID) -> None: ...

    # The Hold's id by position: a background attempt's sink knows its Hold already (`_hold_id`).
    async def end(self, hold_id: uuid.UUID, /, used: int | None, counting: Counting | None,
                  status: UsageStatus) -> None: ...


@dataclass
class Admitted:
    """A request with its places and its Hold; `exits` frees the places."""

    assembly: CompletionAssembly
    settlement: Settlement
    headers: dict[str, str]
    exits: contextlib.AsyncExitStack
    waits: Waits


def hold_ask(planned: PlannedRequest, principal: Principal, model_id: str, request_id: str,
             policy: AdmissionPolicy = FOREGROUND) -> HoldAsk:
    r = planned.request
    return HoldAsk(
        user_id=principal.user_id, key_id=principal.key_id, model=model_id,
        prompt_tokens=sum(len(ids) for ids in planned.prompt_token_ids),
        choices=len(planned.prompt_token_ids) * r.n, max_tokens=planned.max_tokens,
        may_lower=policy.may_lower, source=policy.source, request_id=request_id,
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


class Admission:
    def __init__(self, ledger: Any, traffic: Any, tokenizers: Any, sessions: Any, engine_wait_s: float,
                 counts: Any = None) -> None:
        self.ledger, self.traffic, self.tokenizers, self.sessions = ledger, traffic, tokenizers, sessions
        self.engine_wait_s = engine_wait_s
        self.counts = counts  # the settled tokens' metrics (domain.metrics.counts.Counts)

    async def admit(self, planned: PlannedRequest, model: Any, gateway: ModelGateway, request_id: str,
                    principal: Principal, policy: AdmissionPolicy = FOREGROUND, sink: HoldSink | None = None) -> Admitted:
        """The places, then the Hold (a waiting request holds no tokens).

        `sink` learns the Hold's id before the request runs and takes its
        end; without one, the ledger does.
        """
        exits = contextlib.AsyncExitStack()
        try:
            with stage("line"):
                if policy.key_line:
                    await self._enter_line(exits, principal)
                await exits.enter_async_context(gateway.admitted(wait=policy.wait_for_model))
            ask = hold_ask(planned, principal, model.id, request_id, policy)
            with stage("hold"):
                held = await self.ledger.hold(ask)
            if sink is not None:
                await _released_on_failure(self.ledger, held.hold_id, sink.attach(held.hold_id))
        except BaseException:
            await exits.aclose()
            raise
        headers = clamp_header(planned, held.max_tokens, model.max_model_len)
        planned = dataclasses.replace(planned, max_tokens=held.max_tokens)
        assembly = CompletionAssembly(planned, model.served_model_name, self.tokenizers.get(model).decode)
        settlement = Settlement(sink or self.ledger, held.hold_id, held.tokens, ask, self.counts)
        return Admitted(assembly, settlement, headers, exits, self._waits(planned, policy))

    async def _enter_line(self, exits: contextlib.AsyncExitStack, principal: Principal) -> None:
        clock = asyncio.get_running_loop().time
        entered = clock()
        await exits.enter_async_context(self.traffic.line(str(principal.key_id)))
        if clock() - entered > RECHECK_AFTER_WAIT_S:
            await self._recheck(principal)

    async def _recheck(self, principal: Principal) -> None:
        try:
            async with self.sessions() as session:
                await recheck(session, principal)
        except KeyRefused as refusal:
            raise key_refusal_error(refusal) from None

    def _waits(self, planned: PlannedRequest, policy: AdmissionPolicy) -> Waits:
        first = policy.answer_wait_s or self.engine_wait_s
        # Without a stream the whole answer comes within the wait.
        return Waits(first_s=first, total_s=None if planned.request.stream else first)


async def _released_on_failure(ledger: Any, hold_id: Any, step: Awaitable[None]) -> None:
    try:
        await step
    except BaseException:
        await ledger.end(hold_id, None, None, UsageStatus.failed)
        raise

