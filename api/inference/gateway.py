"""The API's side of one model: admission (breaker, in-flight cap),
deadlines between chunks, and Inference's failures mapped to the spec."""
from __future__ import annotations

import asyncio
import contextlib
import re
import time
from typing import AsyncIterator

from api import errors
from api.inference.breaker import CircuitBreaker
from api.inference.clients import EngineClient
from deployments.engine import (
    EngineDead, EngineOutOfMemory, EngineOutput, EngineRefused, GenerateRequest,
)

CONTEXT_LENGTH = re.compile(r"maximum context length|context length", re.I)
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
    """Inference's failure as the error the API answers."""
    error = root_cause(error)
    if isinstance(error, errors.ApiError):
        return error
    if isinstance(error, EngineRefused):
        if error.code == "context_length_exceeded" or CONTEXT_LENGTH.search(error.message):
            return errors.ContextLengthExceeded(error.message, "prompt")
        return errors.InvalidRequest(error.message, error.param)
    if isinstance(error, EngineOutOfMemory):
        return errors.VllmOom(f"Inference ran out of GPU memory: {error}")
    if isinstance(error, EngineDead):
        return errors.VllmEngineDead(f"Inference's engine stopped: {error}")
    if isinstance(error, (asyncio.TimeoutError, TimeoutError)):
        return errors.UpstreamDeadline(errors.DEADLINE_MESSAGE)
    if _is_unreachable(error):
        return errors.UpstreamUnreachable(errors.UNREACHABLE_MESSAGE)
    return errors.UpstreamServerError(f"Inference failed: {type(error).__name__}: {error}", upstream_status=500)


def counts_as_failure(error: errors.ApiError) -> bool:
    """Refusals of a bad request say nothing about the model's health."""
    return isinstance(error, errors.UpstreamError)


class ModelGateway:
    def __init__(self, model_id: str, client: EngineClient, *, chunk_timeout_s: float,
                 max_in_flight: int = 100, breaker: CircuitBreaker | None = None) -> None:
        self.model_id, self.client = model_id, client
        self.chunk_timeout_s, self.max_in_flight = chunk_timeout_s, max_in_flight
        self.breaker = breaker or CircuitBreaker()
        self.in_flight = 0
        self._place_freed = asyncio.Condition()
        self.last_answer_at: float | None = None
        self.waiting_since: float | None = None

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
        if self.in_flight == 0:
            self.waiting_since = time.time()
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1
            if self.in_flight == 0:
                self.waiting_since = None
            async with self._place_freed:
                self._place_freed.notify()

    def record(self, error: errors.ApiError | None) -> None:
        if error is None:
            self.breaker.record_success()
            self.last_answer_at = asyncio.get_running_loop().time()
        elif counts_as_failure(error):
            self.breaker.record_failure()

    async def stream(self, request: GenerateRequest) -> AsyncIterator[EngineOutput]:
        """The engine's outputs; raises ApiError. Stops when the engine's stream ends."""
        source = self.client.generate(request).__aiter__()
        try:
            while True:
                try:
                    output = await asyncio.wait_for(source.__anext__(), self.chunk_timeout_s)
                except StopAsyncIteration:
                    return
                except errors.ApiError:
                    raise
                except asyncio.CancelledError:
                    raise
                except BaseException as error:  # noqa: BLE001 - every failure is mapped
                    raise map_failure(error) from error
                yield output
        finally:
            await _close(source)


async def _close(source: AsyncIterator[EngineOutput]) -> None:
    closer = getattr(source, "aclose", None) or getattr(source, "cancel", None)
    if closer is None:
        return
    with contextlib.suppress(Exception):
        result = closer()
        if asyncio.iscoroutine(result):
            await result
