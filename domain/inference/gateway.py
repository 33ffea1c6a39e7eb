"""The API's side of one model: admission (breaker, in-flight cap), every
wait for Inference, and Inference's failures mapped to the spec.

The gateway records each answer's success or failure itself (the breaker,
the last answer's time, the requests that wait for Inference's first output):
a caller only reads its outputs.
"""
from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from dataclasses import dataclass
from typing import AsyncGenerator, AsyncIterator, Callable

from domain import errors
from domain.error_mapping import as_api_error
from domain.inference.breaker import CircuitBreaker
from domain.inference.clients import EngineClient
from domain.timing import engine_timing
from deployments.engine import EngineOutput, GenerateRequest

IN_FLIGHT_MESSAGE = "The API has its most requests in flight to {model}. Try again in {seconds} seconds."
BREAKER_MESSAGE = (
    "Inference failed the last {count} requests to {model} in a row, so the API holds the "
    "model back for {seconds} more seconds."
)


def root_cause(error: BaseException) -> BaseException:
    """A replica's exception arrives wrapped in Ray's RayTaskError."""
    cause = getattr(error, "cause", None)
    return cause if isinstance(cause, BaseException) else error


def _is_unreachable(error: BaseException) -> bool:
    name = type(error).__name__
    return name in {
        "RayActorError", "ActorDiedError", "ActorUnavailableError", "DeploymentUnavailableError",
        "BackPressureError", "RaySystemError", "ConnectionError", "ConnectionRefusedError",
    }


def map_failure(error: BaseException) -> errors.ApiError:
    """Inference's failure as the error the API answers: the engine's own errors (a refusal, out
    of memory, a dead engine) as everywhere (domain/error_mapping.py); then what a failed wait for
    Inference means here, where a stream's chunks need an ApiError and no handler runs."""
    error = root_cause(error)
    mapped = as_api_error(error)
    if mapped is not None:
        return mapped
    if isinstance(error, (asyncio.TimeoutError, TimeoutError)):
        return errors.UpstreamDeadline(errors.DEADLINE_MESSAGE)
    if _is_unreachable(error):
        return errors.UpstreamUnreachable(errors.UNREACHABLE_MESSAGE)
    return errors.UpstreamServerError(f"Inference failed: {type(error).__name__}: {error}", upstream_status=500)


@dataclass(frozen=True)
class Waits:
    """How long a request waits for Inference (the one place where a wait
    that runs out becomes 504 upstream_deadline)."""

    first_s: float  # for the first output: a cold start, a long queue
    total_s: float | None = None  # for the whole answer (a request without a stream)


def counts_as_failure(error: errors.ApiError) -> bool:
    """Refusals of a bad request (every 4xx, Inference's own among them) say nothing about the
    model's health: only Inference's failures open the breaker."""
    return isinstance(error, errors.UpstreamError) and error.status >= 500


class ModelGateway:
    def __init__(self, model_id: str, client: EngineClient, *, chunk_timeout_s: float,
                 max_in_flight: int = 100, breaker: CircuitBreaker | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.model_id, self.client = model_id, client
        self.chunk_timeout_s, self.max_in_flight = chunk_timeout_s, max_in_flight
        self.breaker = breaker or CircuitBreaker()
        self.clock = clock  # wall time, for what the status route reads
        self.in_flight = 0
        self._place_freed = asyncio.Condition()
        # When each stream that has no output yet began to wait for Inference.
        self._waiting: dict[int, float] = {}
        self._stream_ids = itertools.count()
        # When Inference last finished a Completion of the model (the Warm fallback).
        self.last_answered_at: float | None = None

    @property
    def waiting_since(self) -> float | None:
        """When the longest wait for Inference's first output began; None when none waits."""
        return min(self._waiting.values(), default=None)

    def _admit(self) -> None:
        retry_after = self.breaker.retry_after()
        if retry_after is not None:
            raise errors.CircuitOpen(BREAKER_MESSAGE.format(
                count=self.breaker.consecutive_failures, model=self.model_id, seconds=retry_after,
            ), retry_after=retry_after)
        if self.in_flight >= self.max_in_flight:
            raise errors.CircuitOpen(IN_FLIGHT_MESSAGE.format(model=self.model_id, seconds=5), retry_after=5)

    @contextlib.asynccontextmanager
    async def admitted(self, wait: bool = False) -> AsyncIterator[None]:
        """Hold one of the model's in-flight places for a whole request.

        A full model answers 503 to a request; background work (`wait`) waits
        for a place instead, as the spec's Traffic table says.
        """
        if wait:
            async with self._place_freed:
                await self._place_freed.wait_for(lambda: self.in_flight < self.max_in_flight)
        self._admit()
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1
            async with self._place_freed:
                self._place_freed.notify()

    def _record(self, error: errors.ApiError | None) -> None:
        if error is None:
            self.breaker.record_success()
            self.last_answered_at = self.clock()
        elif counts_as_failure(error):
            self.breaker.record_failure()

    async def stream(self, request: GenerateRequest, waits: Waits,
                     deadline: float | None = None) -> AsyncGenerator[EngineOutput, None]:
        """The engine's outputs until the finished one; raises ApiError.

        The first output may take `waits.first_s`, each next one the
        gateway's `chunk_timeout_s`, and all of them end by `deadline` (the
        loop's clock) when one is given. A stream that ends unfinished was cut.
        """
        source = self.client.generate(request).__aiter__()
        wait_s, clock = waits.first_s, asyncio.get_running_loop().time
        stream_id = next(self._stream_ids)
        self._waiting[stream_id] = self.clock()
        try:
            while True:
                limit = wait_s if deadline is None else min(wait_s, max(deadline - clock(), 0.0))
                try:
                    output = await self._next(source, limit)
                except errors.ApiError as error:
                    self._record(error)
                    raise
                self._waiting.pop(stream_id, None)
                engine_timing(getattr(output, "timing", None))
                yield output
                if output.finished:
                    self._record(None)
                    return
                wait_s = self.chunk_timeout_s
        finally:
            self._waiting.pop(stream_id, None)
            await _close(source)

    @staticmethod
    async def _next(source: AsyncIterator[EngineOutput], limit_s: float) -> EngineOutput:
        try:
            # A timeout on this task's own wait, not wait_for: on Python 3.11 wait_for runs the
            # wait in a task of its own, three turns of the loop on every output of every stream.
            async with asyncio.timeout(limit_s):
                return await source.__anext__()
        except StopAsyncIteration:
            raise errors.UpstreamServerError(errors.STREAM_CUT_MESSAGE) from None
        except (errors.ApiError, asyncio.CancelledError):
            raise
        except BaseException as error:  # noqa: BLE001 - every failure is mapped, a timeout too
            raise map_failure(error) from error


async def _close(source: AsyncIterator[EngineOutput]) -> None:
    closer = getattr(source, "aclose", None) or getattr(source, "cancel", None)
    if closer is None:
        return
    with contextlib.suppress(Exception):
        result = closer()
        if asyncio.iscoroutine(result):
            await result
