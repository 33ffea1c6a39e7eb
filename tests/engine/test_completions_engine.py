"""POST /v1/completions on the real vLLM engine (tiny random Llama, the
Llama 3.1 tokenizer): the sampling and return fields do what the spec says."""
from __future__ import annotations

from typing import Any

import pytest

from deployments.engine import EngineRefused, GenerateRequest, SamplingSpec
from tests.conftest import build_stack, new_key
from tests.spec import assert_error, validate

SKY = "The sky is"


async def complete(stack: Any, **body: Any) -> dict:
    r = await stack.http.post("/v1/completions", headers=stack.auth(), json={"model": "llama-8b", **body})
    assert r.status_code == 200, r.text
    validate(r.json(), "Completion")
    return r.json()


async def test_sky_is_has_four_prompt_tokens(real_stack: Any) -> None:
    body = await complete(real_stack, prompt=SKY, max_tokens=2, logprobs=1)
    assert body["usage"] == {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}
    assert body["model"] == "acs/tiny-llama-random"
    assert body["object"] == "text_completion" and body["id"].startswith("cmpl-")


async def test_without_special_tokens_the_bos_is_not_counted(real_stack: Any) -> None:
    body = await complete(real_stack, prompt=SKY, max_tokens=1, add_special_tokens=False)
    assert body["usage"]["prompt_tokens"] == 3


async def test_token_id_prompts_count_one_each(real_stack: Any) -> None:
    body = await complete(real_stack, prompt=[[128000, 791, 13180, 374], [791]], max_tokens=1)
    assert body["usage"]["prompt_tokens"] == 5
    assert [c["index"] for c in body["choices"]] == [0, 1]


async def test_temperature_zero_repeats_itself(real_stack: Any) -> None:
    first = await complete(real_stack, prompt=SKY, max_tokens=8, temperature=0)
    second = await complete(real_stack, prompt=SKY, max_tokens=8, temperature=0)
    assert first["choices"][0]["text"] == second["choices"][0]["text"]


async def test_the_same_seed_samples_the_same_tokens(real_stack: Any) -> None:
    runs = [await complete(real_stack, prompt=SKY, max_tokens=8, seed=7) for _ in range(2)]
    assert runs[0]["choices"][0]["text"] == runs[1]["choices"][0]["text"]


async def test_choices_are_indexed_p_times_n_plus_i(real_stack: Any) -> None:
    body = await complete(real_stack, prompt=[SKY, "Grass is"], max_tokens=2, n=2)
    assert [c["index"] for c in body["choices"]] == [0, 1, 2, 3]
    # Usage counts each prompt once, whatever n is ("Grass is" is BOS Gr ass is).
    assert body["usage"]["prompt_tokens"] == 4 + 4
    assert body["usage"]["completion_tokens"] == 8


async def test_stop_text_ends_the_choice(real_stack: Any) -> None:
    greedy = await complete(real_stack, prompt=SKY, max_tokens=6, temperature=0, logprobs=0)
    tokens = greedy["choices"][0]["logprobs"]["tokens"]
    stop = tokens[2]
    body = await complete(real_stack, prompt=SKY, max_tokens=6, temperature=0, stop=[stop])
    choice = body["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] == stop
    assert choice["text"] == greedy["choices"][0]["text"].split(stop)[0]


async def test_logprobs_have_k_or_k_plus_one_top_entries(real_stack: Any) -> None:
    body = await complete(real_stack, prompt=SKY, max_tokens=4, logprobs=3)
    logprobs = body["choices"][0]["logprobs"]
    assert len(logprobs["tokens"]) == len(logprobs["token_logprobs"]) == len(logprobs["top_logprobs"]) == 4
    for token, logprob, top in zip(logprobs["tokens"], logprobs["token_logprobs"], logprobs["top_logprobs"]):
        assert len(top) in (3, 4) and top[token] == logprob
    offsets = logprobs["text_offset"]
    assert offsets == [sum(len(t) for t in logprobs["tokens"][:i]) for i in range(4)]


async def test_greedy_tokens_are_the_likeliest(real_stack: Any) -> None:
    body = await complete(real_stack, prompt=SKY, max_tokens=3, temperature=0, logprobs=5)
    logprobs = body["choices"][0]["logprobs"]
    assert len(logprobs["token_logprobs"]) == len(logprobs["top_logprobs"]) == 3
    for logprob, top in zip(logprobs["token_logprobs"], logprobs["top_logprobs"]):
        assert logprob == pytest.approx(max(top.values()), abs=1e-5)


async def test_prompt_logprobs_rank_and_decoded_token(real_stack: Any) -> None:
    body = await complete(real_stack, prompt=SKY, max_tokens=1, prompt_logprobs=2)
    positions = body["choices"][0]["prompt_logprobs"]
    assert positions[0] is None and len(positions) == 4
    for token_id, position in zip([791, 13180, 374], positions[1:]):
        assert str(token_id) in position and 2 <= len(position) <= 3
        entry = position[str(token_id)]
        assert entry["rank"] >= 1 and isinstance(entry["decoded_token"], str)
        assert sorted(e["rank"] for k, e in position.items() if k != str(token_id))[:2] == [1, 2]


async def test_prompt_logprobs_minus_one_is_the_whole_vocabulary(real_stack: Any) -> None:
    body = await complete(real_stack, prompt="Hi", max_tokens=1, prompt_logprobs=-1)
    positions = body["choices"][0]["prompt_logprobs"]
    assert len(positions) == 2  # <|begin_of_text|> and "Hi" (13347)
    assert positions[0] is None
    assert len(positions[1]) == 128256 and "13347" in positions[1]


async def test_echo_puts_the_prompt_first(real_stack: Any) -> None:
    body = await complete(real_stack, prompt=SKY, max_tokens=2, echo=True, logprobs=1)
    choice = body["choices"][0]
    assert choice["text"].startswith(SKY)
    assert choice["logprobs"]["tokens"][:4] == ["<|begin_of_text|>", "The", " sky", " is"]
    assert choice["logprobs"]["token_logprobs"][0] is None


async def test_echo_with_zero_max_tokens_counts_one_token(real_stack: Any) -> None:
    body = await complete(real_stack, prompt=SKY, max_tokens=0, echo=True)
    assert body["choices"][0]["text"] == SKY
    assert body["usage"]["completion_tokens"] == 1


async def test_zero_max_tokens_without_echo_counts_one_token(real_stack: Any) -> None:
    # The spec: a max_tokens of 0 counts as 1. vLLM refuses 0, so the API asks it for the 1 token
    # that it holds and counts, and the text leaves it out, as with echo.
    body = await complete(real_stack, prompt=SKY, max_tokens=0, logprobs=1)
    [choice] = body["choices"]
    assert choice["text"] == "" and choice["finish_reason"] == "length"
    assert choice["logprobs"]["tokens"] == []
    assert body["usage"] == {"prompt_tokens": 4, "completion_tokens": 1, "total_tokens": 5}


async def test_a_refusal_of_the_engine_is_a_refusal_however_early_it_comes(tiny_engine: Any) -> None:
    # vLLM checks SamplingParams as it builds them, before its stream starts: that refusal too
    # must cross the engine boundary as EngineRefused, never as a failure that opens the breaker.
    spec = SamplingSpec(max_tokens=0, temperature=0.0, final_only=True)
    with pytest.raises(EngineRefused) as refused:
        async for _ in tiny_engine.generate(GenerateRequest("refused-early", [128000, 791], spec)):
            pass
    assert refused.value.param == "max_tokens" and refused.value.code == "invalid_request"
    assert refused.value.message == "max_tokens must be at least 1, got 0."


async def test_refusals_of_inference_leave_the_model_open_for_another_user(tiny_engine: Any, pg_sessions: Any) -> None:
    stack = await build_stack(tiny_engine, pg_sessions, long_wait_s=300.0, engine_timeout_s=300.0,
                              breaker_failures=5)
    try:
        for _ in range(5):
            r = await stack.http.post("/v1/completions", headers=stack.auth(),
                                      json={"model": "llama-8b", "prompt": [999999], "max_tokens": 1})
            assert_error(r, 400, "invalid_request", type="invalid_request_error")
        other = {"Authorization": f"Bearer {await new_key(stack.services.sessions)}"}
        r = await stack.http.post("/v1/completions", headers=other,
                                  json={"model": "llama-8b", "prompt": SKY, "max_tokens": 2})
        assert r.status_code == 200, r.text
        health = (await stack.http.get("/health")).json()
        assert health["status"] == "ok" and health["backends"][0]["breaker_consecutive_failures"] == 0
    finally:
        await stack.http.aclose()


async def test_every_sampling_field_is_accepted(real_stack: Any) -> None:
    body = await complete(real_stack, prompt=SKY, max_tokens=4, temperature=0.7, top_p=0.9, top_k=20, min_p=0.05,
                          presence_penalty=0.5, frequency_penalty=0.5, repetition_penalty=1.2, seed=3,
                          priority="5", user="tester")
    assert body["usage"]["completion_tokens"] == 4


async def test_a_token_id_outside_the_vocabulary_is_refused_by_inference(real_stack: Any) -> None:
    r = await real_stack.http.post("/v1/completions", headers=real_stack.auth(),
                                   json={"prompt": [999999], "max_tokens": 1})
    assert_error(r, 400, "invalid_request", type="invalid_request_error")


async def test_stream_through_the_sdk(real_stack: Any) -> None:
    client = real_stack.openai()
    stream = await client.completions.create(model="llama-8b", prompt=SKY, max_tokens=3, stream=True,
                                             stream_options={"include_usage": True})
    chunks = [chunk async for chunk in stream]
    assert chunks[-1].usage.completion_tokens == 3
    assert "".join(c.choices[0].text for c in chunks if c.choices)


# The per-key line would answer queue_full past 16 + 64: give this test room.
@pytest.mark.traffic(max_waiting=256)
@pytest.mark.parametrize("key_budget", [False, True])
async def test_two_hundred_requests_never_spend_more_than_there_is(real_stack: Any, key_budget: bool) -> None:
    """The tokens hold about half of 200 concurrent requests: each runs (maybe lowered) or
    gets 429 budget_exceeded, and what they settle never passes what the User had."""
    import asyncio

    from tests.accounts import left, set_tokens

    tokens = 100 * (4 + 4)
    await set_tokens(real_stack, allowance=0 if key_budget else tokens, budget=10**9 if key_budget else 0,
                     key_budget=tokens if key_budget else 0)
    body = {"prompt": SKY, "max_tokens": 4, "temperature": 0}
    answers = await asyncio.gather(*[
        real_stack.http.post("/v1/completions", headers=real_stack.auth(), json=body) for _ in range(200)])
    ran = [a for a in answers if a.status_code == 200]
    refused = [a for a in answers if a.status_code == 429]
    assert len(ran) + len(refused) == 200 and len(ran) >= 100
    assert all(a.json()["error"]["code"] == "budget_exceeded" for a in refused)
    spent = sum(a.json()["usage"]["total_tokens"] for a in ran)
    now = await left(real_stack)
    if key_budget:
        assert now.key_budget == tokens - spent >= 0
    else:
        assert now.allowance_used == spent <= tokens


LONG_PROMPTS = [f"Story {i}: the sky is blue, the grass is green, the sea is deep and the night is dark" for i in range(8)]


async def test_seeded_prompts_prefilled_across_several_steps_sample_as_they_do_alone(real_stack: Any) -> None:
    """The tiny model prefills 32 tokens a step, so 8 seeded prompts of ~20 tokens at once are cut
    into chunks; vLLM's CPU engine died on the rewind of their seeded generators
    (deployments/seeded_prefill_fix.py), and a chunked prompt must sample what it samples alone."""
    import asyncio

    def body(prompt: str, seed: int) -> dict:
        return {"prompt": prompt, "max_tokens": 6, "temperature": 1, "seed": seed}

    together = await asyncio.gather(*(complete(real_stack, **body(p, 100 + i)) for i, p in enumerate(LONG_PROMPTS)))
    assert all(c["usage"]["prompt_tokens"] > 16 for c in together)
    alone = [await complete(real_stack, **body(p, 100 + i)) for i, p in enumerate(LONG_PROMPTS[:3])]
    assert [c["choices"][0]["text"] for c in alone] == [c["choices"][0]["text"] for c in together[:3]]
