import pytest


async def test_sky_is(fake_stack):
    r = await fake_stack.http.post("/v1/completions", headers=fake_stack.auth(),
                                   json={"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2, "logprobs": 1})
    assert r.status_code == 200, r.text
    body = r.json()
    print(body)
    assert body["usage"]["prompt_tokens"] == 4
