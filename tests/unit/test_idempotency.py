"""Idempotency-Keys on both ledgers: one run per key and request, the first
answer replayed, 409s for a running key, a stream, or another request,
a freed key after a failure, 24 hours, and one winner among racing requests."""
from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.requests import Request as StarletteRequest

from domain import errors
from api.answers import respond
from api.errors_http import install_error_handlers
from api.idempotency_header import idempotency_key
from domain.answers import replayed
from domain.idempotency import CONFLICT, CONFLICT_ROUTE, NO_ANSWER, RUNNING, Idempotency
from ledger.work import idempotency as records
from ledger.store.coltypes import utcnow
from ledger.work.idempotency import (
    RUNNING_ABANDONED_AFTER, Conflict, InProgress, NoAnswer, Replay, Started, request_hash,
)
from ledger.accounts.keys import create_api_key, create_user
from tests.ledger_fixtures import db_url, pg_url, sessions  # noqa: F401

COMPLETIONS = "POST /v1/completions"
SKY = {"model": "tiny-llama", "prompt": "The sky is", "max_tokens": 2}
# Records start at T0 or a time counted from it, the routes' too (their clock);
# the one test of the real clock reads nothing else. No test mixes the two, so
# each passes on any date.
T0 = datetime(2026, 11, 30, 12, tzinfo=timezone.utc)
CLAMPED = {"X-Acs-Max-Tokens-Clamped": "16 -> 9; budget"}


async def new_user(sessions: Any) -> uuid.UUID:
    async with sessions() as session:
        user = await create_user(session, f"user-{uuid.uuid4().hex[:8]}")
        await session.commit()
    return user.id


async def begin(sessions: Any, user: uuid.UUID, key: str = "sky-001", route: str = COMPLETIONS,
                body: Any = SKY, now: datetime = T0) -> records.Outcome:
    async with sessions() as session:
        return await records.begin(session, user, key, route, request_hash(body), now=now)


async def call(sessions: Any, function: Any, *args: Any) -> Any:
    async with sessions() as session:
        return await function(session, *args)


# The ledger ---------------------------------------------------------------------
async def test_an_answered_request_replays_its_status_body_and_headers(sessions: Any) -> None:
    user = await new_user(sessions)
    started = await begin(sessions, user)
    assert isinstance(started, Started)
    assert await call(sessions, records.finish, started.record_id, 200, '{"id":"cmpl-1"}', CLAMPED)
    again = await begin(sessions, user, body={"max_tokens": 2, "prompt": "The sky is", "model": "tiny-llama"})
    assert again == Replay(200, '{"id":"cmpl-1"}', CLAMPED)


async def test_a_running_request_answers_in_progress(sessions: Any) -> None:
    user = await new_user(sessions)
    assert isinstance(await begin(sessions, user), Started)
    assert isinstance(await begin(sessions, user), InProgress)


async def test_another_body_with_the_key_conflicts(sessions: Any) -> None:
    user = await new_user(sessions)
    started = await begin(sessions, user)
    assert await begin(sessions, user, body={**SKY, "max_tokens": 3}) == Conflict()
    await call(sessions, records.finish, started.record_id, 200, "{}", {})
    assert await begin(sessions, user, body={**SKY, "max_tokens": 3}) == Conflict()


async def test_the_key_on_another_route_conflicts(sessions: Any) -> None:
    user = await new_user(sessions)
    started = await begin(sessions, user)
    await call(sessions, records.finish, started.record_id, 202, "{}", {})
    assert await begin(sessions, user, route="POST /v1/completion-jobs") == Conflict(other_route=True)


async def test_a_stream_runs_once_and_then_has_no_answer(sessions: Any) -> None:
    user = await new_user(sessions)
    started = await begin(sessions, user)
    assert await call(sessions, records.finish_without_answer, started.record_id)
    assert isinstance(await begin(sessions, user), NoAnswer)


async def test_release_frees_the_key_but_never_erases_an_answer(sessions: Any) -> None:
    user = await new_user(sessions)
    first = await begin(sessions, user)
    assert await call(sessions, records.release, first.record_id)
    second = await begin(sessions, user)
    assert isinstance(second, Started) and second.record_id != first.record_id
    await call(sessions, records.finish, second.record_id, 200, "{}", {})
    assert not await call(sessions, records.release, second.record_id)
    assert not await call(sessions, records.finish, second.record_id, 500, "late", {})
    assert await begin(sessions, user) == Replay(200, "{}", {})


async def test_a_key_is_kept_24_hours(sessions: Any) -> None:
    user = await new_user(sessions)
    first = await begin(sessions, user)
    await call(sessions, records.finish, first.record_id, 200, "{}", {})
    assert isinstance(await begin(sessions, user, now=T0 + timedelta(hours=23, minutes=59)), Replay)
    # After 24 hours the key is new, with another request too.
    later = await begin(sessions, user, body={**SKY, "n": 2}, now=T0 + timedelta(hours=24))
    assert isinstance(later, Started) and later.record_id != first.record_id
    assert isinstance(await begin(sessions, user, body={**SKY, "n": 2}, now=T0 + timedelta(hours=24)), InProgress)


async def test_purge_expired_deletes_only_records_past_24_hours(sessions: Any) -> None:
    user = await new_user(sessions)
    await begin(sessions, user, key="old", now=T0)
    await begin(sessions, user, key="new", now=T0 + timedelta(hours=1))
    assert await call(sessions, records.purge_expired, T0 + timedelta(hours=24)) == 1
    assert isinstance(await begin(sessions, user, key="new", now=T0 + timedelta(hours=1, minutes=10)), InProgress)
    assert isinstance(await begin(sessions, user, key="old", now=T0 + timedelta(hours=2)), Started)


async def test_one_set_of_keys_per_user_across_api_keys(sessions: Any) -> None:
    alice, bob = await new_user(sessions), await new_user(sessions)
    async with sessions() as session:
        await create_api_key(session, alice, "laptop")
        await create_api_key(session, alice, "cluster")
        await session.commit()
    # The record belongs to the User, whichever of her keys sent the request.
    assert isinstance(await begin(sessions, alice), Started)
    assert isinstance(await begin(sessions, alice), InProgress)
    assert isinstance(await begin(sessions, bob), Started)


async def test_racing_requests_with_one_key_run_once(sessions: Any) -> None:
    user = await new_user(sessions)
    outcomes = await asyncio.gather(*(begin(sessions, user) for _ in range(20)))
    assert sum(isinstance(outcome, Started) for outcome in outcomes) == 1
    assert sum(isinstance(outcome, InProgress) for outcome in outcomes) == 19


async def test_racing_requests_replace_an_expired_record_once(sessions: Any) -> None:
    user = await new_user(sessions)
    old = await begin(sessions, user)
    await call(sessions, records.finish, old.record_id, 200, "{}", {})
    later = T0 + timedelta(hours=25)
    outcomes = await asyncio.gather(*(begin(sessions, user, now=later) for _ in range(20)))
    assert sum(isinstance(outcome, Started) for outcome in outcomes) == 1
    assert sum(isinstance(outcome, InProgress) for outcome in outcomes) == 19


def test_request_hash_ignores_key_order_and_spacing() -> None:
    assert request_hash({"a": 1, "b": [1, 2]}) == request_hash({"b": [1, 2], "a": 1})
    assert request_hash({"a": 1}) != request_hash({"a": 2})
    assert len(request_hash(SKY)) == 64


# The header ---------------------------------------------------------------------
def header_request(value: str | None) -> StarletteRequest:
    headers = [] if value is None else [(b"idempotency-key", value.encode())]
    return StarletteRequest({"type": "http", "method": "POST", "path": "/v1/completions", "headers": headers})


@pytest.mark.parametrize("length", [0, 256, 300])
def test_a_key_outside_1_to_255_characters_is_refused(length: int) -> None:
    with pytest.raises(errors.InvalidRequest) as refused:
        idempotency_key(header_request("k" * length))
    error = refused.value
    assert (error.status, error.type, error.code, error.param) == (400, "invalid_request_error", "invalid_request", None)
    assert error.message == f"The Idempotency-Key header has 1 to 255 characters: this one has {length}."


@pytest.mark.parametrize("length", [1, 36, 255])
def test_a_key_of_1_to_255_characters_is_taken(length: int) -> None:
    assert idempotency_key(header_request("k" * length)) == "k" * length


def test_no_header_means_no_key() -> None:
    assert idempotency_key(header_request(None)) is None


# The HTTP side --------------------------------------------------------------------
def at(moment: datetime) -> Any:
    """A clock for Idempotency that always reads `moment`."""
    return lambda: moment


def app_over(sessions: Any, clock: Any = at(T0)) -> FastAPI:
    """A route that uses Idempotency as the writing routes do: answer, stream, or fail."""
    app = FastAPI()
    install_error_handlers(app)
    idempotency = Idempotency(sessions, clock=clock)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        body = await request.json()
        user = uuid.UUID(request.headers["x-user"])
        claim = await idempotency.start(user, idempotency_key(request), COMPLETIONS, body)
        if isinstance(claim, Replay):
            return respond(replayed(claim))
        if body.get("fail"):
            await idempotency.free(claim.record_id)
            raise errors.BudgetExceeded("This request can use up to 13 tokens.")
        if body.get("stream"):
            await idempotency.streamed(claim.record_id)
            return JSONResponse({"streamed": True})
        answer = JSONResponse({"id": f"cmpl-{uuid.uuid4().hex}", "text": "é"}, headers=CLAMPED)
        await idempotency.answered(claim.record_id, 200, answer.body, CLAMPED)
        return answer

    return app


async def post(http: httpx.AsyncClient, user: uuid.UUID, key: str, body: Any) -> httpx.Response:
    return await http.post("/v1/completions", json=body, headers={"Idempotency-Key": key, "x-user": str(user)})


def assert_409(response: httpx.Response, code: str, message: str, headers: dict[str, str]) -> None:
    assert response.status_code == 409, response.text
    assert response.json()["error"] == {"message": message, "type": "invalid_request_error",
                                        "param": None, "code": code}
    for name, value in headers.items():
        assert response.headers.get(name) == value


async def test_a_route_replays_the_first_answer_byte_for_byte(sessions: Any) -> None:
    user = await new_user(sessions)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app_over(sessions)), base_url="http://t") as http:
        first = await post(http, user, "k1", SKY)
        again = await post(http, user, "k1", SKY)
        assert first.status_code == again.status_code == 200
        assert again.content == first.content and again.json()["text"] == "é"
        assert again.headers["x-acs-max-tokens-clamped"] == CLAMPED["X-Acs-Max-Tokens-Clamped"]
        assert again.headers["content-type"] == "application/json"
        assert_409(await post(http, user, "k1", {**SKY, "max_tokens": 3}), "idempotency_conflict", CONFLICT,
                   {"x-should-retry": "false"})


async def test_a_route_answers_the_409s_and_frees_a_failed_key(sessions: Any) -> None:
    user = await new_user(sessions)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app_over(sessions)), base_url="http://t") as http:
        assert (await post(http, user, "s", {**SKY, "stream": True})).status_code == 200
        assert_409(await post(http, user, "s", {**SKY, "stream": True}), "no_answer", NO_ANSWER,
                   {"x-should-retry": "false"})
        assert (await post(http, user, "f", {**SKY, "fail": True})).status_code == 429
        assert (await post(http, user, "f", {**SKY, "fail": True})).status_code == 429  # ran again: key freed
        assert isinstance(await begin(sessions, user, key="r"), Started)
        assert_409(await post(http, user, "r", SKY), "running", RUNNING, {"retry-after": "1"})
        assert "x-should-retry" not in (await post(http, user, "r", SKY)).headers


async def test_the_route_conflict_names_the_route(sessions: Any) -> None:
    user = await new_user(sessions)
    await begin(sessions, user, key="j", route="POST /v1/completion-jobs")
    with pytest.raises(errors.IdempotencyConflict) as refused:
        await Idempotency(sessions, clock=at(T0)).start(user, "j", COMPLETIONS, SKY)
    assert refused.value.message == CONFLICT_ROUTE
    assert refused.value.headers() == {"x-should-retry": "false"}


async def test_the_clock_of_idempotency_dates_its_records(sessions: Any) -> None:
    """Running, abandoned and expired are read at the clock's time, not the real one."""
    user = await new_user(sessions)
    await begin(sessions, user, key="r")
    with pytest.raises(errors.IdempotencyRunning):
        await Idempotency(sessions, clock=at(T0 + RUNNING_ABANDONED_AFTER - timedelta(seconds=1))).start(
            user, "r", COMPLETIONS, SKY)
    late = Idempotency(sessions, clock=at(T0 + RUNNING_ABANDONED_AFTER))
    claim = await late.start(user, "r", COMPLETIONS, SKY)
    assert isinstance(claim, Started)
    await late.answered(claim.record_id, 200, {"id": "cmpl-1"})
    # The record the route made starts at its clock's time: kept 24 hours from then.
    kept = T0 + RUNNING_ABANDONED_AFTER + records.KEPT_FOR
    assert await Idempotency(sessions, clock=at(kept - timedelta(seconds=1))).start(
        user, "r", COMPLETIONS, SKY) == Replay(200, '{"id":"cmpl-1"}', {})
    assert isinstance(await Idempotency(sessions, clock=at(kept)).start(user, "r", COMPLETIONS, SKY), Started)


async def test_idempotency_reads_the_real_clock_by_default(sessions: Any) -> None:
    user = await new_user(sessions)
    now = utcnow()
    await begin(sessions, user, key="fresh", now=now)
    await begin(sessions, user, key="stale", now=now - RUNNING_ABANDONED_AFTER - timedelta(minutes=1))
    with pytest.raises(errors.IdempotencyRunning):
        await Idempotency(sessions).start(user, "fresh", COMPLETIONS, SKY)
    assert isinstance(await Idempotency(sessions).start(user, "stale", COMPLETIONS, SKY), Started)


async def test_a_record_running_past_any_request_counts_as_abandoned(sessions) -> None:
    """A request whose process died never ends its record: the key is not stuck for 24 hours."""
    from datetime import timedelta

    from ledger.work.idempotency import RUNNING_ABANDONED_AFTER, Started, begin
    from ledger.accounts.keys import create_user

    async with sessions() as session:
        user = await create_user(session, "abandoned")
        await session.commit()
    t0 = datetime(2026, 11, 30, 12, tzinfo=timezone.utc)
    async with sessions() as session:
        assert isinstance(await begin(session, user.id, "k", "POST /v1/completions", "h", now=t0), Started)
    later = t0 + RUNNING_ABANDONED_AFTER + timedelta(seconds=1)
    async with sessions() as session:
        assert isinstance(await begin(session, user.id, "k", "POST /v1/completions", "h", now=later), Started)
