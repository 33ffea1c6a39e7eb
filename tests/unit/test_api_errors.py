"""Refusals of the API over HTTP, as a user sees them: the 401s, the body
cap, bad JSON, strict validation and the caps with the spec's exact
messages, Inference's failures mapped to the spec's codes, the circuit
breaker and the in-flight cap. All over the fake engine, in process.
"""
from __future__ import annotations

import asyncio

import httpx
import pytest
from sqlmodel import select

from deployments.engine import EngineDead, EngineOutOfMemory, EngineRefused
from ledger.accounts.keys import hash_key, set_key_status, set_standing
from ledger.accounts.tables import ApiKey, KeyStatus, Standing, User
from tests.conftest import new_key
from tests.spec import assert_error, validate
from tests.waiting import wait_until

MiB = 1024 * 1024
SKY = {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2}
INVALID = "invalid_request_error"
UPSTREAM = "upstream_error"

# The spec's messages (docs.md: Use API keys, Fix a 401 error).
MISSING_KEY = (
    "You didn't provide an API key. You need to provide your API key in an Authorization header "
    "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
)
WRONG_KEY = "Incorrect API key provided."
REVOKED = "This API key has been revoked."
PAUSED = "This API key is paused. Resume it on API Keys in the App to use it again."
SUSPENDED = "Your access to ACS Infra is suspended. Write to infra@acsresearch.org if you think this is a mistake."
# docs.md: Inference fails, Cold starts and long requests.
UNREACHABLE = "Could not reach Inference: Connection error."
TIMED_OUT = "Could not reach Inference: Request timed out."



async def complete(stack, **fields) -> httpx.Response:
    return await stack.http.post("/v1/completions", headers=stack.auth(), json={**SKY, **fields})


async def post_raw(stack, content, headers: dict[str, str] | None = None) -> httpx.Response:
    return await stack.http.post("/v1/completions", content=content, headers={**stack.auth(), **(headers or {})})


def context_message(prompt: int, max_tokens: int, max_model_len: int = 2048) -> str:
    """vLLM's words, as docs.md 'Prompt too long' prints them."""
    return (
        f"This model's maximum context length is {max_model_len} tokens. However, you requested "
        f"{max_tokens} output tokens and your prompt contains {prompt} input tokens, for a total of "
        f"{prompt + max_tokens} tokens. Please reduce the length of the input prompt or the number of "
        f"requested output tokens. (parameter=input_tokens, value={prompt})"
    )


async def own_key(stack) -> ApiKey:
    async with stack.services.sessions() as session:
        return (await session.exec(select(ApiKey).where(ApiKey.key_hash == hash_key(stack.key)))).one()


async def set_status(stack, status: KeyStatus) -> None:
    key = await own_key(stack)
    async with stack.services.sessions() as session:
        await set_key_status(session, key.id, status)
        await session.commit()


async def suspend_user(stack) -> None:
    key = await own_key(stack)
    async with stack.services.sessions() as session:
        await set_standing(session, await session.get(User, key.user_id), Standing.suspended)
        await session.commit()


def assert_retry_in_body(error: dict, response: httpx.Response, seconds: int) -> None:
    assert error["retryable"] is True
    assert error["retry_after_seconds"] == seconds
    assert response.headers["retry-after"] == str(seconds)


# 401 ---------------------------------------------------------------------------------

@pytest.mark.parametrize("authorization", [None, "", "Bearer", "Bearer   ", "Basic dXNlcjpwYXNz", "sk-acs-abc"])
async def test_missing_authorization(fake_stack, authorization):
    headers = {} if authorization is None else {"Authorization": authorization}
    response = await fake_stack.http.post("/v1/completions", json=SKY, headers=headers)
    error = assert_error(response, 401, "missing_authorization", message=MISSING_KEY, type=INVALID)
    assert error["param"] is None


@pytest.mark.parametrize("key", ["sk-acs-wrong", "not-a-key", "acs-bm-wrong"])
async def test_invalid_api_key(fake_stack, key):
    response = await fake_stack.http.post("/v1/completions", json=SKY, headers={"Authorization": f"Bearer {key}"})
    assert_error(response, 401, "invalid_api_key", message=WRONG_KEY, param=None, type=INVALID)


async def test_bearer_scheme_is_case_insensitive(fake_stack):
    response = await fake_stack.http.get("/v1/models", headers={"Authorization": f"bearer {fake_stack.key}"})
    assert response.status_code == 200


async def test_revoked_key(fake_stack):
    await set_status(fake_stack, KeyStatus.revoked)
    assert_error(await complete(fake_stack), 401, "key_revoked", message=REVOKED, param=None, type=INVALID)


async def test_paused_key(fake_stack):
    await set_status(fake_stack, KeyStatus.paused)
    assert_error(await complete(fake_stack), 401, "key_disabled", message=PAUSED, param=None, type=INVALID)


async def test_resumed_key_works_again(fake_stack):
    await set_status(fake_stack, KeyStatus.paused)
    await set_status(fake_stack, KeyStatus.active)
    assert (await complete(fake_stack)).status_code == 200


async def test_suspended_user(fake_stack):
    await suspend_user(fake_stack)
    assert_error(await complete(fake_stack), 401, "account_suspended", message=SUSPENDED, param=None, type=INVALID)


async def test_suspension_wins_over_a_paused_key(fake_stack):
    await set_status(fake_stack, KeyStatus.paused)
    await suspend_user(fake_stack)
    assert_error(await complete(fake_stack), 401, "account_suspended")


async def test_openai_sdk_raises_authentication_error(fake_stack):
    import openai

    client = openai.AsyncOpenAI(base_url="http://api.test/v1", api_key="sk-acs-wrong",
                                http_client=fake_stack.http, max_retries=0)
    with pytest.raises(openai.AuthenticationError) as info:
        await client.completions.create(model="llama-8b", prompt="The sky is", max_tokens=2)
    assert info.value.code == "invalid_api_key"


# Body: size and JSON ----------------------------------------------------------------------

async def test_key_is_checked_before_the_body_is_read(fake_stack):
    response = await fake_stack.http.post("/v1/completions", content=b" " * (9 * MiB))
    assert_error(response, 401, "missing_authorization")


async def test_wrong_key_is_checked_before_the_body_is_read(fake_stack):
    response = await fake_stack.http.post("/v1/completions", content=b" " * (9 * MiB),
                                          headers={"Authorization": "Bearer sk-acs-wrong"})
    assert_error(response, 401, "invalid_api_key")


async def test_body_over_8_mib(fake_stack):
    response = await post_raw(fake_stack, b" " * (8 * MiB + 1))
    assert_error(response, 413, "request_too_large", param=None, type=INVALID, headers={"x-should-retry": "false"})


async def test_body_of_8_mib_is_read(fake_stack):
    body = httpx.Response(200, json=SKY).content
    response = await post_raw(fake_stack, body + b" " * (8 * MiB - len(body)))
    assert response.status_code == 200, response.text


async def test_chunked_body_over_8_mib(fake_stack):
    sent = []

    async def chunks():
        for _ in range(20):
            sent.append(MiB)
            yield b" " * MiB

    response = await post_raw(fake_stack, chunks())
    assert_error(response, 413, "request_too_large", headers={"x-should-retry": "false"})
    assert "content-length" not in response.request.headers
    assert len(sent) < 20  # refused as it passed the cap, not after the whole body


async def test_chunked_body_under_the_cap(fake_stack):
    body = httpx.Response(200, json=SKY).content

    async def chunks():
        for i in range(0, len(body), 7):
            yield body[i:i + 7]

    response = await post_raw(fake_stack, chunks())
    assert response.status_code == 200, response.text


async def test_chat_body_over_8_mib(fake_stack):
    response = await fake_stack.http.post("/v1/chat/completions", content=b" " * (8 * MiB + 1))
    assert_error(response, 413, "request_too_large", headers={"x-should-retry": "false"})


@pytest.mark.parametrize("content", [b"{not json", b"", b"\xff\xfe", b'{"prompt": "a"'])
async def test_body_not_json(fake_stack, content):
    response = await post_raw(fake_stack, content, {"Content-Type": "application/json"})
    assert_error(response, 400, "bad_json", param=None, type=INVALID)


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
async def test_json_is_read_whatever_the_content_type(fake_stack, content_type):
    body = httpx.Response(200, json=SKY).content
    response = await post_raw(fake_stack, body, {} if content_type is None else {"Content-Type": content_type})
    # The request went with this content type, or none at all: else the case tests nothing.
    assert response.request.headers.get("content-type") == content_type
    assert response.status_code == 200, response.text
    validate(response.json(), "Completion")


@pytest.mark.parametrize("body", [b"[1, 2]", b'"text"', b"3", b"null"])
async def test_body_not_an_object(fake_stack, body):
    response = await post_raw(fake_stack, body)
    assert_error(response, 400, "invalid_request", param=None, type=INVALID)


# Strict validation: the spec's own examples ------------------------------------------------

async def test_max_tokens_as_a_string(fake_stack):
    response = await complete(fake_stack, max_tokens="2")
    assert_error(response, 400, "invalid_request", message="Invalid type for 'max_tokens': expected a number.",
                 param="max_tokens", type=INVALID)


async def test_misspelled_field(fake_stack):
    body = {"model": "llama-8b", "prompt": "The sky is", "temprature": 0}
    response = await fake_stack.http.post("/v1/completions", json=body, headers=fake_stack.auth())
    assert_error(response, 400, "invalid_request", message="Unknown parameter: 'temprature'.",
                 param="temprature", type=INVALID)


async def test_unknown_field_inside_a_steering_vector(fake_stack):
    vector = {"activations": [[0.5] * 64], "layer_indices": [1], "scael": 4}
    response = await complete(fake_stack, apply_steering_vectors=[vector])
    assert_error(response, 400, "invalid_request", message="Unknown parameter: 'apply_steering_vectors[0].scael'.",
                 param="apply_steering_vectors", type=INVALID)


async def test_the_32000_token_cap(fake_stack):
    body = {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 16001, "n": 2}
    response = await fake_stack.http.post("/v1/completions", json=body, headers=fake_stack.auth())
    assert_error(response, 400, "invalid_request", type=INVALID, param="max_tokens", message=(
        "At most 32000 generated tokens in all: n = 2 times max_tokens = 16001 for each of 1 prompts is 32002."))


async def test_logprobs_minus_one(fake_stack):
    response = await complete(fake_stack, logprobs=-1)
    assert_error(response, 400, "invalid_request", param="logprobs",
                 message="Invalid value for 'logprobs': expected a value greater than or equal to 0.")


async def test_logprobs_as_a_string(fake_stack):
    response = await complete(fake_stack, logprobs="2")
    assert_error(response, 400, "invalid_request", param="logprobs",
                 message="Invalid type for 'logprobs': expected a number or null.")


async def test_nul_in_the_prompt(fake_stack):
    response = await complete(fake_stack, prompt="The sky\x00 is")
    assert_error(response, 400, "invalid_request", param="prompt", type=INVALID,
                 message="A text cannot hold the character U+0000 (NUL).")


@pytest.mark.parametrize("field,value", [("stop", "a\x00"), ("user", "u\x00"), ("model", "llama\x00")])
async def test_nul_in_other_texts(fake_stack, field, value):
    response = await complete(fake_stack, **{field: value})
    assert_error(response, 400, "invalid_request", param=field,
                 message="A text cannot hold the character U+0000 (NUL).")


# Strict validation: unknown fields and wrong types --------------------------------------------

@pytest.mark.parametrize("field,value", [
    ("extra_body", {"top_k": 5}), ("best_of", 2), ("suffix", "x"), ("logit_bias", {"50256": -100}),
])
async def test_fields_the_api_does_not_take(fake_stack, field, value):
    response = await complete(fake_stack, **{field: value})
    assert_error(response, 400, "invalid_request", message=f"Unknown parameter: '{field}'.", param=field, type=INVALID)


async def test_unknown_key_in_stream_options(fake_stack):
    response = await complete(fake_stack, stream=True, stream_options={"include_usage": True, "include_usag": True})
    assert_error(response, 400, "invalid_request", message="Unknown parameter: 'stream_options.include_usag'.",
                 param="stream_options", type=INVALID)


@pytest.mark.parametrize("field,value,expected", [
    ("temperature", "2", "a number"),
    ("echo", 1, "a boolean"),
    ("stream", "true", "a boolean"),
    ("n", True, "a number"),
    ("top_p", "1", "a number"),
])
async def test_wrong_types(fake_stack, field, value, expected):
    response = await complete(fake_stack, **{field: value})
    assert_error(response, 400, "invalid_request", message=f"Invalid type for '{field}': expected {expected}.",
                 param=field, type=INVALID)


async def test_whole_number_for_a_decimal_field(fake_stack):
    assert (await complete(fake_stack, temperature=1)).status_code == 200


@pytest.mark.parametrize("value,sent", [("5", 5), (True, 1), (False, 0), (None, 0), (3, 3)])
async def test_priority_forms_accepted(fake_stack, value, sent):
    response = await complete(fake_stack, priority=value)
    assert response.status_code == 200, response.text
    assert fake_stack.engine.seen[-1].sampling.priority == sent


async def test_negative_priority(fake_stack):
    response = await complete(fake_stack, priority=-1)
    assert_error(response, 400, "invalid_request", param="priority",
                 message="Invalid value for 'priority': expected a value greater than or equal to 0.")


@pytest.mark.parametrize("field,value,expected", [
    ("logprobs", 101, "a value less than or equal to 100"),
    ("temperature", 2.5, "a value less than or equal to 2"),
    ("top_p", 0, "a value greater than 0"),
    ("top_k", -2, "a value greater than or equal to -1"),
    ("n", 0, "a value greater than or equal to 1"),
    ("prompt_logprobs", 101, "a value less than or equal to 100"),
])
async def test_values_out_of_range(fake_stack, field, value, expected):
    response = await complete(fake_stack, **{field: value})
    assert_error(response, 400, "invalid_request", message=f"Invalid value for '{field}': expected {expected}.",
                 param=field, type=INVALID)


# Strict validation: rules between fields -------------------------------------------------------

async def test_several_choices_at_temperature_0(fake_stack):
    response = await complete(fake_stack, n=2, temperature=0)
    assert_error(response, 400, "invalid_request", param="n", type=INVALID, message=(
        "Set n to 1, or temperature to 0.00001 or more: at a lower temperature, "
        "Inference picks the likeliest token each time."))


async def test_several_choices_at_temperature_0_00001(fake_stack):
    assert (await complete(fake_stack, n=2, temperature=0.00001)).status_code == 200


async def test_stream_options_without_stream(fake_stack):
    response = await complete(fake_stack, stream_options={"include_usage": True})
    assert_error(response, 400, "invalid_request", param="stream_options", type=INVALID)


async def test_stream_options_with_stream_false(fake_stack):
    response = await complete(fake_stack, stream=False, stream_options={"include_usage": True})
    assert_error(response, 400, "invalid_request", param="stream_options")


async def test_prompt_logprobs_with_stream(fake_stack):
    response = await complete(fake_stack, stream=True, prompt_logprobs=1)
    assert_error(response, 400, "invalid_request", param="prompt_logprobs", type=INVALID)


# Size caps and max_tokens rules ------------------------------------------------------------------

async def test_deadline_infeasible_without_stream(fake_stack):
    response = await complete(fake_stack, max_tokens=15601)
    assert_error(response, 400, "deadline_infeasible", param="max_tokens", type=INVALID,
                 headers={"x-should-retry": "false"})


async def test_15601_tokens_with_stream_pass_validation_then_meet_the_context(fake_stack):
    response = await complete(fake_stack, max_tokens=15601, stream=True)
    assert_error(response, 400, "context_length_exceeded", param="prompt", type=INVALID,
                 message=context_message(prompt=4, max_tokens=15601))


async def test_prompt_and_max_tokens_over_the_context(fake_stack):
    response = await complete(fake_stack, max_tokens=2045)
    assert_error(response, 400, "context_length_exceeded", param="prompt", type=INVALID,
                 message=context_message(prompt=4, max_tokens=2045))
    assert fake_stack.engine.seen == []


@pytest.mark.fake(eos_after=1)
async def test_prompt_and_max_tokens_that_fill_the_context(fake_stack):
    response = await complete(fake_stack, max_tokens=2044)
    assert response.status_code == 200, response.text
    assert fake_stack.engine.seen[-1].sampling.max_tokens == 2044


async def test_context_counts_token_id_prompts_as_they_are(fake_stack):
    response = await complete(fake_stack, prompt=[791] * 2000, max_tokens=49)
    assert_error(response, 400, "context_length_exceeded", param="prompt",
                 message=context_message(prompt=2000, max_tokens=49))


async def test_several_prompts_need_max_tokens(fake_stack):
    body = {"model": "llama-8b", "prompt": ["The sky is", "The sea is"]}
    response = await fake_stack.http.post("/v1/completions", json=body, headers=fake_stack.auth())
    assert_error(response, 400, "invalid_request", param="max_tokens", type=INVALID)


async def test_several_choices_need_max_tokens(fake_stack):
    body = {"model": "llama-8b", "prompt": "The sky is", "n": 2}
    response = await fake_stack.http.post("/v1/completions", json=body, headers=fake_stack.auth())
    assert_error(response, 400, "invalid_request", param="max_tokens", type=INVALID)


async def test_more_than_4_stop_texts(fake_stack):
    response = await complete(fake_stack, stop=["a", "b", "c", "d", "e"])
    assert_error(response, 400, "invalid_request", param="stop", type=INVALID)


async def test_4_stop_texts(fake_stack):
    assert (await complete(fake_stack, stop=["a", "b", "c", "d"])).status_code == 200


async def test_more_than_128_choices(fake_stack):
    response = await complete(fake_stack, prompt=["a", "b"], n=65, max_tokens=1)
    assert_error(response, 400, "invalid_request", param="n", type=INVALID)


async def test_128_choices(fake_stack):
    response = await complete(fake_stack, prompt=["a", "b"], n=64, max_tokens=1)
    assert response.status_code == 200, response.text
    assert len(response.json()["choices"]) == 128


async def test_full_vocabulary_over_256_prompt_tokens(fake_stack):
    response = await complete(fake_stack, prompt=[791] * 257, prompt_logprobs=-1)
    assert_error(response, 400, "invalid_request", param="prompt_logprobs", type=INVALID)


async def test_full_vocabulary_counts_n(fake_stack):
    response = await complete(fake_stack, prompt=[791] * 129, prompt_logprobs=-1, n=2)
    assert_error(response, 400, "invalid_request", param="prompt_logprobs")


async def test_full_vocabulary_at_256_prompt_tokens(fake_stack):
    response = await complete(fake_stack, prompt=[791] * 256, prompt_logprobs=-1, max_tokens=1)
    assert response.status_code == 200, response.text


# Inference fails ----------------------------------------------------------------------------------

@pytest.mark.fake(fail_before_first=EngineOutOfMemory("CUDA out of memory"))
async def test_out_of_memory(fake_stack):
    response = await complete(fake_stack)
    error = assert_error(response, 502, "vllm_oom", param=None, type=UPSTREAM)
    assert_retry_in_body(error, response, 30)


@pytest.mark.fake(fail_before_first=EngineDead("the engine core died"))
async def test_engine_dead(fake_stack):
    response = await complete(fake_stack)
    error = assert_error(response, 502, "vllm_engine_dead", param=None, type=UPSTREAM)
    assert_retry_in_body(error, response, 30)


@pytest.mark.fake(fail_before_first=EngineRefused("bad token id", "prompt"))
async def test_inference_refuses_a_value(fake_stack):
    response = await complete(fake_stack)
    error = assert_error(response, 400, "invalid_request", message="bad token id", param="prompt", type=INVALID)
    assert "retry-after" not in response.headers
    assert error.get("retryable") in (None, False)


@pytest.mark.fake(fail_before_first=EngineRefused("too long for the model", "prompt", code="context_length_exceeded"))
async def test_inference_refuses_the_context(fake_stack):
    response = await complete(fake_stack)
    assert_error(response, 400, "context_length_exceeded", message="too long for the model", param="prompt",
                 type=INVALID)


@pytest.mark.fake(fail_before_first=EngineRefused("The prompt has a bad value", "prompt", code="vllm_invalid_request"))
async def test_inference_fails_and_blames_the_request(fake_stack):
    response = await complete(fake_stack)
    error = assert_error(response, 400, "vllm_invalid_request", message="The prompt has a bad value", param="prompt",
                         type=UPSTREAM, headers={"x-should-retry": "false"})
    assert error["upstream_status"] == 500
    assert error["retryable"] is False
    assert "retry-after" not in response.headers


@pytest.mark.fake(fail_before_first=EngineRefused("maximum context length is 64", code="vllm_invalid_request"))
async def test_inference_fails_and_blames_the_prompt_length(fake_stack):
    response = await complete(fake_stack)
    assert_error(response, 400, "vllm_context_length", message="maximum context length is 64", type=UPSTREAM)


@pytest.mark.fake(fail_before_first=RuntimeError("boom"))
async def test_other_inference_failure(fake_stack):
    response = await complete(fake_stack)
    error = assert_error(response, 502, "upstream_server_error", param=None, type=UPSTREAM,
                         headers={"x-should-retry": "false"})
    assert error["upstream_status"] == 500
    assert error["retryable"] is False
    assert "retry_after_seconds" not in error
    assert "retry-after" not in response.headers


@pytest.mark.fake(fail_before_first=ConnectionError("refused"))
async def test_inference_unreachable(fake_stack):
    response = await complete(fake_stack)
    error = assert_error(response, 502, "upstream_unreachable", message=UNREACHABLE, param=None, type=UPSTREAM)
    assert_retry_in_body(error, response, 30)


@pytest.mark.fake(first_delay_s=0.6)
@pytest.mark.settings(engine_timeout_s=0.2, long_wait_s=5.0)
async def test_inference_too_slow(fake_stack):
    response = await complete(fake_stack)
    error = assert_error(response, 504, "upstream_deadline", message=TIMED_OUT, param=None, type=UPSTREAM,
                         headers={"x-should-retry": "false"})
    assert error["retryable"] is False


@pytest.mark.fake(first_delay_s=0.6)
@pytest.mark.settings(engine_timeout_s=0.2, long_wait_s=5.0)
async def test_inference_too_slow_for_a_stream(fake_stack):
    response = await complete(fake_stack, stream=True)
    assert_error(response, 504, "upstream_deadline", message=TIMED_OUT, type=UPSTREAM,
                 headers={"x-should-retry": "false"})


@pytest.mark.fake(fail_before_first=EngineOutOfMemory("CUDA out of memory"))
async def test_openai_sdk_raises_internal_server_error(fake_stack):
    import openai

    with pytest.raises(openai.InternalServerError) as info:
        await fake_stack.openai().completions.create(model="llama-8b", prompt="The sky is", max_tokens=2)
    assert info.value.status_code == 502
    assert info.value.code == "vllm_oom"


# The circuit breaker ---------------------------------------------------------------------------------

async def health(stack) -> dict:
    response = await stack.http.get("/health")
    validate(response.json(), "Health")
    return response.json()


async def open_the_breaker(stack) -> None:
    for _ in range(2):
        assert_error(await complete(stack), 502, "vllm_engine_dead")


@pytest.mark.fake(fail_before_first=EngineDead("down"))
@pytest.mark.settings(breaker_failures=2, breaker_open_s=30.0)
async def test_breaker_opens_after_failures_in_a_row(fake_stack):
    await open_the_breaker(fake_stack)
    seen = len(fake_stack.engine.seen)
    response = await complete(fake_stack)
    error = assert_error(response, 503, "circuit_open", type=UPSTREAM)
    seconds = int(response.headers["retry-after"])
    assert 1 <= seconds <= 30
    assert_retry_in_body(error, response, seconds)
    assert len(fake_stack.engine.seen) == seen  # nothing reached Inference


@pytest.mark.fake(fail_before_first=EngineDead("down"))
@pytest.mark.settings(breaker_failures=2, breaker_open_s=30.0)
async def test_health_shows_the_open_breaker(fake_stack):
    await open_the_breaker(fake_stack)
    body = await health(fake_stack)
    assert body["status"] == "degraded"
    assert body["degraded_backends"] == ["tiny-llama"]
    [backend] = body["backends"]
    assert backend["breaker_state"] == "open"
    assert backend["breaker_consecutive_failures"] == 2
    assert 1 <= backend["breaker_open_seconds"] <= 30
    assert backend["in_flight"] == 0


@pytest.mark.fake(fail_before_first=EngineRefused("bad token id", "prompt"))
@pytest.mark.settings(breaker_failures=2)
async def test_refusals_do_not_open_the_breaker(fake_stack):
    for _ in range(3):
        assert_error(await complete(fake_stack), 400, "invalid_request")
    assert (await health(fake_stack))["backends"][0]["breaker_state"] == "closed"


@pytest.mark.parametrize("refusal", [
    EngineRefused("max_tokens must be at least 1, got 0.", "max_tokens"),
    EngineRefused("The prompt has a bad value", code="vllm_invalid_request"),
    EngineRefused("maximum context length is 64", code="vllm_invalid_request"),
])
@pytest.mark.settings(breaker_failures=5)
async def test_five_refusals_from_one_user_leave_the_model_open_for_another(fake_stack, refusal):
    fake_stack.engine.fail_before_first = refusal
    for _ in range(5):
        assert (await complete(fake_stack)).status_code == 400
    fake_stack.engine.fail_before_first = None
    other = {"Authorization": f"Bearer {await new_key(fake_stack.services.sessions)}"}
    response = await fake_stack.http.post("/v1/completions", headers=other,
                                          json={"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2})
    assert response.status_code == 200, response.text
    body = await health(fake_stack)
    assert body["status"] == "ok" and body["backends"][0]["breaker_consecutive_failures"] == 0


@pytest.mark.fake(fail_before_first=EngineDead("down"))
@pytest.mark.settings(breaker_failures=2)
async def test_a_success_resets_the_count(fake_stack):
    assert_error(await complete(fake_stack), 502, "vllm_engine_dead")
    fake_stack.engine.fail_before_first = None
    assert (await complete(fake_stack)).status_code == 200
    fake_stack.engine.fail_before_first = EngineDead("down")
    assert_error(await complete(fake_stack), 502, "vllm_engine_dead")
    assert (await health(fake_stack))["backends"][0]["breaker_state"] == "closed"


@pytest.mark.fake(fail_before_first=EngineDead("down"))
@pytest.mark.settings(breaker_failures=2, breaker_open_s=0.3)
async def test_a_success_after_the_pause_closes_the_breaker(fake_stack):
    await open_the_breaker(fake_stack)
    assert_error(await complete(fake_stack), 503, "circuit_open")
    await asyncio.sleep(0.35)
    fake_stack.engine.fail_before_first = None
    assert (await complete(fake_stack)).status_code == 200
    body = await health(fake_stack)
    assert body["status"] == "ok" and body["degraded_backends"] == []
    assert body["backends"][0]["breaker_state"] == "closed"
    assert (await complete(fake_stack)).status_code == 200


@pytest.mark.fake(fail_before_first=EngineDead("down"))
@pytest.mark.settings(breaker_failures=2, breaker_open_s=0.3)
async def test_a_failure_after_the_pause_opens_it_again(fake_stack):
    await open_the_breaker(fake_stack)
    await asyncio.sleep(0.35)
    assert_error(await complete(fake_stack), 502, "vllm_engine_dead")
    assert_error(await complete(fake_stack), 503, "circuit_open")


@pytest.mark.fake(fail_before_first=EngineDead("down"))
@pytest.mark.settings(breaker_failures=2, breaker_open_s=30.0)
async def test_open_breaker_in_a_stream_request(fake_stack):
    await open_the_breaker(fake_stack)
    response = await complete(fake_stack, stream=True)
    assert_error(response, 503, "circuit_open", type=UPSTREAM)
    assert response.headers["content-type"].startswith("application/json")


# The in-flight cap -----------------------------------------------------------------------------------

@pytest.mark.fake(delay_s=0.2)
@pytest.mark.settings(max_in_flight_per_model=1, long_wait_s=10.0)
async def test_in_flight_cap(fake_stack):
    gateway = fake_stack.services.gateways["tiny-llama"]
    first = asyncio.create_task(complete(fake_stack, max_tokens=3))
    await wait_until(lambda: gateway.in_flight == 1)
    response = await complete(fake_stack)
    error = assert_error(response, 503, "circuit_open", type=UPSTREAM)
    assert_retry_in_body(error, response, 5)
    assert (await first).status_code == 200
    assert gateway.in_flight == 0
    assert (await complete(fake_stack)).status_code == 200


@pytest.mark.fake(delay_s=0.2)
@pytest.mark.settings(max_in_flight_per_model=1, long_wait_s=10.0)
async def test_in_flight_cap_does_not_open_the_breaker(fake_stack):
    gateway = fake_stack.services.gateways["tiny-llama"]
    first = asyncio.create_task(complete(fake_stack, max_tokens=2))
    await wait_until(lambda: gateway.in_flight == 1)
    assert (await health(fake_stack))["backends"][0]["in_flight"] == 1
    for _ in range(3):
        assert_error(await complete(fake_stack), 503, "circuit_open")
    await first
    assert gateway.breaker.state == "closed"
