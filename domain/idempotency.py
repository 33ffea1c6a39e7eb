"""The `Idempotency-Key` of every writing route (spec/docs.md "Send a request again
safely"); the records themselves live in `ledger.work.idempotency`, and the header is read
by api/idempotency_header.py.

    key = checked_key(value)                 # None: the request runs each time
    claim = await Idempotency(sessions).start(user_id, key, route, body)
    if isinstance(claim, Replay): return domain.answers.replayed(claim)
    ... then exactly one of answered / streamed / free with claim.record_id
"""
from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, AsyncIterator, TypeVar

from domain import errors
from ledger.store.survive import survive
from ledger.work import idempotency as records
from ledger.store.coltypes import utcnow
from ledger.work.idempotency import KEY_MAX, Conflict, InProgress, NoAnswer, Replay, Started, request_hash

# The spec prints none of these messages: ours, in its voice.
KEY_LENGTH = "The Idempotency-Key header has 1 to 255 characters: this one has {length}."
RUNNING = "A request with this Idempotency-Key still runs. Try again in 1 second."
NO_ANSWER = (
    "A request with this Idempotency-Key ran as a stream, and a stream cannot be sent again. "
    "Send a new key to run it again."
)
CONFLICT = (
    "This Idempotency-Key came before with another request. "
    "Send a new key with each new request."
)
CONFLICT_ROUTE = (
    "This Idempotency-Key came before on another route. "
    "Send a new key with each new request."
)
T = TypeVar("T")


def checked_key(key: str | None) -> str | None:
    """A request's key (None: it came without one); 400 outside 1 to 255 characters."""
    if key is not None and not 1 <= len(key) <= KEY_MAX:
        raise errors.InvalidRequest(KEY_LENGTH.format(length=len(key)))
    return key


class Idempotency:
    """What a route calls around its work; each call is one short ledger transaction."""

    def __init__(self, sessions: Any, clock: Callable[[], datetime] = utcnow) -> None:
        self.sessions = sessions  # async_sessionmaker of the ledger
        # The time a record starts, expires and counts as abandoned at; a test sets its own.
        self.clock = clock

    async def start(self, user_id: uuid.UUID, key: str, route: str, body: Any) -> Started | Replay:
        """Own the key (Started), or get the first answer (Replay); else raise the 409."""
        async with self.sessions() as session:
            outcome = await records.begin(session, user_id, key, route, request_hash(body), now=self.clock())
        if isinstance(outcome, (Started, Replay)):
            return outcome
        raise _refusal(outcome)

    async def answered(self, record_id: uuid.UUID, status: int, body: bytes | str | Any,
                       headers: dict[str, str] | None = None) -> bool:
        """Keep the answer for repeats (rendered bytes replay exactly); False: it had ended."""
        text = _body_text(body)
        return await _finish_anyway(self._run(records.finish, record_id, status, text, headers or {}))

    async def streamed(self, record_id: uuid.UUID) -> bool:
        """A stream ran: its repeats get 409 no_answer."""
        return await _finish_anyway(self._run(records.finish_without_answer, record_id))

    @contextlib.asynccontextmanager
    async def claimed(self, user_id: uuid.UUID, key: str | None, route: str,
                      body: Any) -> AsyncIterator[Started | Replay | None]:
        """The key's claim (None without a key) for the block that queues the work;
        the key is freed when the block fails, so a retry runs anew."""
        claim = None if key is None else await self.start(user_id, key, route, body)
        try:
            yield claim
        except BaseException:
            if isinstance(claim, Started):
                await self.free(claim.record_id)
            raise

    async def free(self, record_id: uuid.UUID) -> bool:
        """The request failed before it was charged: the same request may run again."""
        return await _finish_anyway(self._run(records.release, record_id))

    async def _run(self, function: Any, *args: Any) -> bool:
        async with self.sessions() as session:
            return await function(session, *args)


def _refusal(outcome: InProgress | NoAnswer | Conflict) -> errors.ApiError:
    if isinstance(outcome, InProgress):
        return errors.IdempotencyRunning(RUNNING)
    if isinstance(outcome, NoAnswer):
        return errors.IdempotencyNoAnswer(NO_ANSWER)
    return errors.IdempotencyConflict(CONFLICT_ROUTE if outcome.other_route else CONFLICT)


def _body_text(body: bytes | str | Any) -> str:
    if isinstance(body, bytes):
        return body.decode()
    if isinstance(body, str):
        return body
    # As Starlette's JSONResponse renders it, so a replay matches the first answer.
    return json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


async def _finish_anyway(work: Awaitable[T]) -> T:
    # Runs in a route's `finally`, maybe while the client's going away cancels
    # it: the record must still end, or the key would answer 409 running.
    return await survive(work)
