"""Idempotency-Key on POST /v1/completions, as "Retry requests safely" says."""
from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from tests.spec import assert_error
from tests.accounts import set_tokens

SKY = {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2}


async def post(stack: Any, key: str, **fields: Any) -> Any:
    headers = {**stack.auth(), "Idempotency-Key": key}
    return await stack.http.post("/v1/completions", headers=headers, json={**SKY, **fields})


async def test_the_same_request_gets_the_first_answer(fake_stack: Any) -> None:
    key = str(uuid.uuid4())
    first, again = await post(fake_stack, key), await post(fake_stack, key)
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json()
    assert len(fake_stack.engine.seen) == 1


async def test_a_replay_keeps_the_clamp_header(fake_stack: Any) -> None:
    await set_tokens(fake_stack, allowance=25)
    key = str(uuid.uuid4())
    first = await post(fake_stack, key, max_tokens=200)
    await set_tokens(fake_stack, allowance=None)  # a change of Budget does not change the replay
    again = await post(fake_stack, key, max_tokens=200)
    assert again.headers["x-acs-max-tokens-clamped"] == first.headers["x-acs-max-tokens-clamped"]
    assert again.json() == first.json()


@pytest.mark.fake(delay_s=0.3)
async def test_a_repeat_while_the_first_runs_is_409_running(fake_stack: Any) -> None:
    key = str(uuid.uuid4())
    first = asyncio.create_task(post(fake_stack, key))
    await asyncio.sleep(0.1)
    assert_error(await post(fake_stack, key), 409, "running", headers={"Retry-After": "1"})
    assert (await first).status_code == 200


async def test_a_stream_runs_once(fake_stack: Any) -> None:
    key = str(uuid.uuid4())
    assert (await post(fake_stack, key, stream=True)).status_code == 200
    assert_error(await post(fake_stack, key, stream=True), 409, "no_answer", headers={"x-should-retry": "false"})
    assert len(fake_stack.engine.seen) == 1


@pytest.mark.fake(delay_s=0.1)
async def test_a_completion_whose_client_went_away_gives_its_repeat_its_answer(fake_stack: Any) -> None:
    """It runs on without its client: a repeat meanwhile is 409 running, and after it the answer."""
    key = str(uuid.uuid4())
    client = asyncio.create_task(post(fake_stack, key, max_tokens=4))
    async with asyncio.timeout(60):  # the first request loads the tokenizer
        while not fake_stack.engine.seen:
            await asyncio.sleep(0.01)
    client.cancel()  # the client goes away, as Serve cancels the task that serves it
    await asyncio.gather(client, return_exceptions=True)
    assert_error(await post(fake_stack, key, max_tokens=4), 409, "running")
    async with asyncio.timeout(30):
        while (again := await post(fake_stack, key, max_tokens=4)).status_code == 409:
            await asyncio.sleep(0.1)
    assert again.status_code == 200 and again.json()["usage"]["completion_tokens"] == 4
    assert len(fake_stack.engine.seen) == 1


async def test_another_request_with_the_key_conflicts(fake_stack: Any) -> None:
    key = str(uuid.uuid4())
    await post(fake_stack, key)
    assert_error(await post(fake_stack, key, max_tokens=3), 409, "idempotency_conflict",
                 headers={"x-should-retry": "false"}, type="invalid_request_error")


async def test_a_request_refused_before_it_was_charged_frees_its_key(fake_stack: Any) -> None:
    await set_tokens(fake_stack, allowance=3)
    key = str(uuid.uuid4())
    assert_error(await post(fake_stack, key), 429, "budget_exceeded")
    await set_tokens(fake_stack, allowance=None)
    assert (await post(fake_stack, key)).status_code == 200


@pytest.mark.parametrize("length,status", [(255, 200), (256, 400)])
async def test_a_key_has_1_to_255_characters(fake_stack: Any, length: int, status: int) -> None:
    r = await post(fake_stack, "k" * length)
    assert r.status_code == status, r.text
