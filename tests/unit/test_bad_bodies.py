"""Bodies that no route can use: a lone surrogate in any text, JSON nested too deeply, and an integer of
more digits than Python reads.

Each gets the spec's error object with a 400, never a 500, and nothing that the refused request
sent is left behind. All over the fake engine, in process.
"""
from __future__ import annotations

from typing import Any

import pytest
from sqlmodel import select

from ledger.accounts.tables import ApiKey
from ledger.work.tables import Loom
from tests.own_account import sign_in
from tests.spec import assert_error

LONE = "\\ud800"  # the JSON escape of half of a surrogate pair
SURROGATE = "Invalid value for '{path}': expected a text without half of a surrogate pair, such as a lone \\ud800."
JSON = {"Content-Type": "application/json"}

# (route, raw body, the field that holds the surrogate, its path)
KEY_ROUTES = [
    ("/v1/completions", '{"model": "llama-8b", "prompt": "The sky is %s", "max_tokens": 2}' % LONE, "prompt", "prompt"),
    ("/v1/completions", '{"model": "llama-8b", "prompt": ["ok", "x%s"], "max_tokens": 2}' % LONE, "prompt",
     "prompt[1]"),
    ("/v1/completions", '{"model": "llama-8b", "prompt": "ok", "stop": ["%s"], "max_tokens": 2}' % LONE, "stop",
     "stop[0]"),
    ("/v1/completion-jobs", '{"model": "llama-8b", "prompt": "%sx", "max_tokens": 2}' % LONE, "prompt", "prompt"),
    ("/v1/looms", '{"model": "llama-8b", "prompt": "Once %s"}' % LONE, "prompt", "prompt"),
]


async def post_raw(stack: Any, path: str, body: str | bytes, headers: dict[str, str]) -> Any:
    return await stack.http.post(path, content=body, headers={**JSON, **headers})


async def looms_of(stack: Any) -> int:
    async with stack.services.sessions() as session:
        return len((await session.exec(select(Loom))).all())


@pytest.mark.parametrize(("path", "body", "param", "where"), KEY_ROUTES)
async def test_a_lone_surrogate_in_a_text_is_refused(fake_stack: Any, path: str, body: str, param: str,
                                                     where: str) -> None:
    looms = await looms_of(fake_stack)
    response = await post_raw(fake_stack, path, body, fake_stack.auth())
    assert_error(response, 400, "invalid_request", message=SURROGATE.format(path=where), param=param,
                 type="invalid_request_error")
    assert await looms_of(fake_stack) == looms


async def test_a_lone_surrogate_in_a_field_name_is_refused(fake_stack: Any) -> None:
    body = '{"model": "llama-8b", "prompt": "ok", "x%s": 1}' % LONE
    response = await post_raw(fake_stack, "/v1/completions", body, fake_stack.auth())
    assert_error(response, 400, "invalid_request", param=None, type="invalid_request_error")
    assert "surrogate" in response.json()["error"]["message"]


async def test_an_app_route_refuses_a_lone_surrogate_and_makes_no_key(fake_stack: Any) -> None:
    account = await sign_in(fake_stack, key_name=None)
    response = await account.browser.post("/account/keys", content='{"name": "%sx"}' % LONE, headers=JSON)
    assert_error(response, 400, "invalid_request", message=SURROGATE.format(path="name"), param="name")
    async with fake_stack.services.sessions() as session:
        keys = (await session.exec(select(ApiKey).where(ApiKey.user_id == account.user_id))).all()
    assert keys == []


async def test_an_application_with_a_lone_surrogate_is_refused(fake_stack: Any) -> None:
    account = await sign_in(fake_stack, key_name=None)  # only for its CSRF cookie
    body = '{"email": "x@example.org", "name": "A %s"}' % LONE
    response = await account.browser.post("/account/applications", content=body, headers=JSON)
    assert_error(response, 400, "invalid_request", message=SURROGATE.format(path="name"), param="name")


@pytest.mark.parametrize("body", ["[" * 200_000, "[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000])
async def test_json_nested_too_deeply_is_bad_json(fake_stack: Any, body: str) -> None:
    response = await post_raw(fake_stack, "/v1/completions", body, fake_stack.auth())
    assert_error(response, 400, "bad_json", type="invalid_request_error")


async def test_json_nested_deeply_but_readably_gets_the_fields_answer(fake_stack: Any) -> None:
    body = '{"model": "llama-8b", "prompt": %s, "max_tokens": 2}' % ("[" * 900 + "]" * 900)
    response = await post_raw(fake_stack, "/v1/completions", body, fake_stack.auth())
    assert_error(response, 400, "invalid_request", param="prompt", type="invalid_request_error")


async def test_an_app_route_answers_deep_json_with_bad_json(fake_stack: Any) -> None:
    account = await sign_in(fake_stack, key_name=None)
    response = await account.browser.post("/account/keys", content="[" * 200_000, headers=JSON)
    assert_error(response, 400, "bad_json", type="invalid_request_error")


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/looms"])
async def test_a_number_of_more_than_4300_digits_is_bad_json(fake_stack: Any, path: str) -> None:
    """The fuzzing tier found a 500 here: Python's json reads at most 4300 digits of an integer, and
    past them raises a ValueError that is no JSONDecodeError."""
    looms = await looms_of(fake_stack)
    body = '{"model": "llama-8b", "prompt": "ok", "max_tokens": %s}' % ("1" * 4301)
    response = await post_raw(fake_stack, path, body, fake_stack.auth())
    assert_error(response, 400, "bad_json", type="invalid_request_error", param=None,
                 message="The request body is not valid JSON: it has a number of more than 4300 digits.")
    assert await looms_of(fake_stack) == looms


async def test_a_number_of_4300_digits_is_read(fake_stack: Any) -> None:
    body = '{"model": "llama-8b", "prompt": "ok", "max_tokens": %s}' % ("1" * 4300)
    response = await post_raw(fake_stack, "/v1/completions", body, fake_stack.auth())
    assert_error(response, 400, "invalid_request", param="max_tokens")
