"""Tokens through POST /v1/completions: the Hold, the lowered max_tokens
and its header, budget_exceeded word for word, settlement, the spend stop,
the per-key line and the rate limits (fake engine, PostgreSQL ledger)."""
from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone
from typing import Any

import pytest

from domain.traffic.limits import BucketPolicy
from ledger.tokens.grants import standing
from ledger.accounts.keys import (
    ACCOUNT_SUSPENDED, KEY_DISABLED, KEY_REVOKED, Principal, set_key_status, set_standing,
)
from ledger.accounts.tables import KeyStatus, Standing
from ledger.tokens.spend import set_spend_stop
from tests.accounts import left, principal, set_tokens
from tests.spec import assert_error

SKY = {"model": "llama-8b", "prompt": "The sky is"}
ASK_MORE = " Ask for more tokens at https://v2.infra.acsresearch.org/usage/request."


async def complete(stack: Any, **fields: Any) -> Any:
    return await stack.http.post("/v1/completions", headers=stack.auth(), json={**SKY, **fields})


async def test_the_sky_is_settles_to_its_usage(fake_stack: Any) -> None:
    r = await complete(fake_stack, max_tokens=2)
    assert r.status_code == 200 and "x-acs-max-tokens-clamped" not in r.headers
    assert (await left(fake_stack)).allowance_used == 6


async def test_twenty_five_tokens_left_lower_max_tokens_to_21(fake_stack: Any) -> None:
    await set_tokens(fake_stack, allowance=25)
    r = await complete(fake_stack, max_tokens=200)
    assert r.status_code == 200
    assert r.headers["x-acs-max-tokens-clamped"] == "requested=200,applied=21,reason=budget,source=client"
    assert fake_stack.engine.seen[-1].sampling.max_tokens == 21
    assert r.json()["choices"][0]["finish_reason"] == "length"


async def test_a_lowered_default_says_source_default(fake_stack: Any) -> None:
    await set_tokens(fake_stack, allowance=25)
    r = await complete(fake_stack)
    # The default is the context left: 2048 - 4 tokens of the prompt.
    assert r.headers["x-acs-max-tokens-clamped"] == "requested=2044,applied=21,reason=budget,source=default"


async def test_budget_exceeded_names_the_users_budget(fake_stack: Any) -> None:
    await set_tokens(fake_stack, allowance=0, budget=4)
    r = await complete(fake_stack, max_tokens=200)
    assert_error(r, 429, "budget_exceeded", param=None, headers={"x-should-retry": "false"},
                 message="This request can use up to 204 tokens, more than your token budget has left." + ASK_MORE)


async def test_budget_exceeded_names_the_keys_budget(fake_stack: Any) -> None:
    await set_tokens(fake_stack, key_budget=4)
    r = await complete(fake_stack, max_tokens=200)
    assert_error(r, 429, "budget_exceeded",
                 message="This request can use up to 204 tokens, more than this API key's token budget has left.")


async def test_budget_exceeded_names_the_allowance_and_its_refill_day(fake_stack: Any) -> None:
    await set_tokens(fake_stack, allowance=4)
    r = await complete(fake_stack, max_tokens=200)
    now = datetime.now(timezone.utc)
    refill = datetime(now.year + (now.month == 12), now.month % 12 + 1, 1).date().isoformat()
    assert_error(r, 429, "budget_exceeded", message=(
        "This request can use up to 204 tokens, more than your monthly allowance has left this month "
        f"and more than your token budget has left. Your monthly allowance refills on {refill} (UTC)." + ASK_MORE))


async def test_a_refused_request_holds_nothing(fake_stack: Any) -> None:
    await set_tokens(fake_stack, allowance=4)
    await complete(fake_stack, max_tokens=200)
    assert (await left(fake_stack)).allowance_used == 0 and fake_stack.engine.seen == []


@pytest.mark.fake(fail_before_first=RuntimeError("boom"))
async def test_a_failure_before_any_token_costs_nothing(fake_stack: Any) -> None:
    r = await complete(fake_stack, max_tokens=5)
    assert r.status_code == 502
    assert (await left(fake_stack)).allowance_used == 0


@pytest.mark.fake(fail_after_tokens=2)
async def test_a_stream_that_fails_pays_what_it_sent(fake_stack: Any) -> None:
    r = await complete(fake_stack, max_tokens=10, stream=True)
    assert r.status_code == 200 and '"upstream_server_error"' in r.text
    assert (await left(fake_stack)).allowance_used == 4 + 2


async def test_the_spend_stop_refuses_new_work(fake_stack: Any) -> None:
    async with fake_stack.services.ledger.write_sessions() as session:
        await set_spend_stop(session, True, "test")
    try:
        r = await complete(fake_stack, max_tokens=2)
        assert_error(r, 429, "spend_cap", headers={"Retry-After": "3600", "x-should-retry": "false"})
    finally:
        async with fake_stack.services.ledger.write_sessions() as session:
            await set_spend_stop(session, False)


@pytest.mark.fake(delay_s=0.2)
@pytest.mark.traffic(max_running=1, max_waiting=1)
async def test_the_keys_line_refuses_past_its_waiting_room(fake_stack: Any) -> None:
    first = [asyncio.create_task(complete(fake_stack, max_tokens=3)) for _ in range(2)]
    await asyncio.sleep(0.1)
    r = await complete(fake_stack, max_tokens=3)
    assert_error(r, 429, "queue_full", type="rate_limit_error", headers={"Retry-After": "5"})
    assert [t.status_code for t in await asyncio.gather(*first)] == [200, 200]


@pytest.mark.traffic(key_work=BucketPolicy(2, 0.5))
async def test_the_work_bucket_answers_rate_limited(fake_stack: Any) -> None:
    for _ in range(2):
        assert (await complete(fake_stack, max_tokens=1)).status_code == 200
    r = await complete(fake_stack, max_tokens=1)
    error = assert_error(r, 429, "rate_limited", type="rate_limit_error", headers={"Retry-After": "2"})
    assert error["message"].endswith("Try again in 2 seconds.")
    # Other routes have their own bucket.
    assert (await fake_stack.http.get("/v1/models", headers=fake_stack.auth())).status_code == 200


@pytest.mark.traffic(address=BucketPolicy(2, 0.5))
async def test_bad_keys_from_one_address_are_rate_limited(fake_stack: Any) -> None:
    bad = {"Authorization": "Bearer sk-acs-wrong"}
    for _ in range(2):
        assert_error(await fake_stack.http.get("/v1/models", headers=bad), 401, "invalid_api_key")
    assert_error(await fake_stack.http.get("/v1/models", headers=bad), 429, "rate_limited")


@pytest.mark.fake(first_delay_s=1.0)
@pytest.mark.settings(long_wait_s=0.3, keepalive_s=0.1)
async def test_a_long_answer_keeps_the_clamp_header(fake_stack: Any) -> None:
    """Past the long wait the answer is 200 and spaces, with the admission's headers."""
    await set_tokens(fake_stack, allowance=25)
    r = await complete(fake_stack, max_tokens=200)
    assert r.status_code == 200 and r.content.startswith(b" ")
    assert r.headers["x-acs-max-tokens-clamped"] == "requested=200,applied=21,reason=budget,source=client"
    assert r.json()["usage"]["completion_tokens"] == 21


# A client that goes away (Serve cancels the task that serves it) ------------------------------------

async def _served_until(stack: Any, body: dict, enough: Any) -> list[bytes]:
    """POST /v1/completions straight to the app; once `enough(pieces)` holds for the body pieces
    sent so far, the client goes away: the task that serves it is cancelled, as Serve does."""
    pieces: list[bytes] = []
    seen = asyncio.Event()
    data = json.dumps(body).encode()
    headers = [(b"authorization", f"Bearer {stack.key}".encode()), (b"content-type", b"application/json"),
               (b"content-length", str(len(data)).encode())]
    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/v1/completions", "raw_path": b"/v1/completions",
             "query_string": b"", "root_path": "", "headers": headers, "client": ("127.0.0.1", 5000),
             "server": ("api.test", 80)}
    bodies = [{"type": "http.request", "body": data, "more_body": False}]

    async def receive() -> dict:
        if bodies:
            return bodies.pop()
        await asyncio.Event().wait()  # no disconnect message: the cancel is how it leaves
        return {}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.body":
            pieces.append(message.get("body", b""))
            if enough(pieces):
                seen.set()
                await asyncio.Event().wait()  # the reader stops reading

    served = asyncio.create_task(stack.app(scope, receive, send))
    await asyncio.wait_for(seen.wait(), 60)  # the first loads the tokenizer
    served.cancel()
    await asyncio.gather(served, return_exceptions=True)
    return pieces


def _events(pieces: list[bytes]) -> list[bytes]:
    return [piece for piece in pieces if piece.startswith(b"data: ")]


async def test_a_stream_whose_client_goes_away_pays_what_it_sent_and_leaves_the_line(fake_stack: Any) -> None:
    await _served_until(fake_stack, {**SKY, "max_tokens": 50, "stream": True},
                        lambda pieces: len(_events(pieces)) == 3)
    who = await principal(fake_stack)
    # The 3 tokens of the 3 events sent, and the prompt's 4.
    await until(lambda: left(fake_stack), lambda standing: standing.allowance_used == 4 + 3)
    line = fake_stack.services.traffic.key_line
    await until(lambda: line.counts(str(who.key_id)), lambda counts: counts.running == 0)


@pytest.mark.fake(delay_s=0.05)
async def test_a_completion_without_a_stream_runs_on_when_its_client_goes_away_and_pays_its_usage(
        fake_stack: Any) -> None:
    await asyncio.wait_for(_leave_once_it_runs(fake_stack, max_tokens=6), 60)
    await until(lambda: left(fake_stack), lambda standing: standing.allowance_used == 4 + 6)


@pytest.mark.fake(first_delay_s=0.3, delay_s=0.05)
@pytest.mark.settings(long_wait_s=0.1, keepalive_s=0.05)
async def test_a_long_answer_runs_on_when_its_client_goes_away_and_pays_its_usage(fake_stack: Any) -> None:
    pieces = await _served_until(fake_stack, {**SKY, "max_tokens": 6}, lambda pieces: b" " in pieces)
    assert set(pieces) == {b" "}  # it left during the spaces, before the answer
    await until(lambda: left(fake_stack), lambda standing: standing.allowance_used == 4 + 6)


async def _leave_once_it_runs(stack: Any, **fields: Any) -> None:
    """The client goes away (its task cancelled) once Inference has the request, before any answer."""
    seen = len(stack.engine.seen)
    client = asyncio.create_task(complete(stack, **fields))
    await until(lambda: asyncio.sleep(0, len(stack.engine.seen)), lambda count: count > seen)
    client.cancel()
    await asyncio.gather(client, return_exceptions=True)


async def _change_key_while_it_waits(stack: Any, change: Any) -> Any:
    """One request runs and holds the key's only place (the stack's traffic: max_running=1); a
    second waits in the line while `change` is made to its key or User; the first finishes."""
    who, seen = await principal(stack), len(stack.engine.seen)
    running = asyncio.create_task(complete(stack, max_tokens=3))
    await until(lambda: asyncio.sleep(0, len(stack.engine.seen)), lambda count: count > seen)
    waiting = asyncio.create_task(complete(stack, max_tokens=3))
    line = stack.services.traffic.key_line
    await until(lambda: line.counts(str(who.key_id)), lambda counts: counts.waiting == 1)
    async with stack.services.ledger.write_sessions() as session:
        await change(session, who)
        await session.commit()
    assert (await running).status_code == 200
    return await waiting, who


@pytest.mark.fake(delay_s=0.2)
@pytest.mark.traffic(max_running=1, max_waiting=4)
@pytest.mark.parametrize("change, code, message", [
    (lambda s, who: set_key_status(s, who.key_id, KeyStatus.revoked), "key_revoked", KEY_REVOKED),
    (lambda s, who: set_key_status(s, who.key_id, KeyStatus.paused), "key_disabled", KEY_DISABLED),
    (lambda s, who: _suspend(s, who), "account_suspended", ACCOUNT_SUSPENDED),
])
async def test_a_request_waiting_in_the_line_gets_its_keys_401(fake_stack: Any, change: Any, code: str,
                                                                 message: str) -> None:
    seen = len(fake_stack.engine.seen)
    r, who = await _change_key_while_it_waits(fake_stack, change)
    assert_error(r, 401, code, message=message, param=None, type="invalid_request_error")
    assert len(fake_stack.engine.seen) == seen + 1  # only the first request reached Inference
    async with fake_stack.services.sessions() as session:
        assert (await standing(session, who.user_id, who.key_id)).allowance_used == 7  # and only it paid


async def until(read: Any, done: Any, timeout_s: float = 30.0) -> None:
    """Poll the coroutine `read()` until `done` holds for what it returns."""
    async with asyncio.timeout(timeout_s):
        while not done(await read()):
            await asyncio.sleep(0.01)


async def _suspend(session: Any, who: Principal) -> None:
    from ledger.accounts.tables import User

    await set_standing(session, await session.get(User, who.user_id), Standing.suspended)
