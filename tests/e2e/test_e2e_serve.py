"""End to end: a local Ray, the Serve application of the test profile
(ingress + the real vLLM engine on the tiny model), PostgreSQL, and real
HTTP through the `openai` SDK, httpx and curl."""
from __future__ import annotations

import json
import os
import subprocess
from typing import Iterator

import httpx
import openai
import pytest

from tests.serve_fixtures import PORT, ServeInstance
from tests.spec import assert_error, validate

BASE = f"http://127.0.0.1:{PORT}/v1"


@pytest.fixture(scope="module")
def serve_stack(serve_instance: ServeInstance) -> Iterator[str]:
    """The test profile at the root: the key of a new user."""
    with serve_instance.application("test", "acs", "/") as base:
        assert base == BASE
        yield serve_instance.new_key("e2e")


@pytest.fixture
def client(serve_stack: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=BASE, api_key=serve_stack, max_retries=0)


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_quickstart_python(client: openai.OpenAI) -> None:
    completion = client.completions.create(model="llama-8b", prompt="The sky is", logprobs=1, max_tokens=2)
    validate(completion.model_dump(exclude_unset=True), "Completion")
    assert completion.usage.prompt_tokens == 4
    assert completion.usage.completion_tokens == 2
    assert completion.model == "acs/tiny-llama-random"
    assert len(completion.choices[0].logprobs.token_logprobs) == 2
    assert completion.choices[0].finish_reason == "length"


def test_quickstart_stream(client: openai.OpenAI) -> None:
    stream = client.completions.create(model="llama-8b", prompt="The sky is", max_tokens=4, stream=True,
                                       stream_options={"include_usage": True})
    chunks = list(stream)
    texts = [c.choices[0].text for c in chunks if c.choices]
    assert len(texts) == 4
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == 8
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"


def test_stream_ends_with_done(serve_stack: str) -> None:
    body = {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2, "stream": True}
    with httpx.stream("POST", f"{BASE}/completions", json=body, headers=auth(serve_stack), timeout=60) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [line for line in r.iter_lines() if line]
    assert events[-1] == "data: [DONE]"
    for event in events[:-1]:
        chunk = json.loads(event.removeprefix("data: "))
        assert chunk["object"] == "text_completion" and chunk["model"] == "acs/tiny-llama-random"


def test_quickstart_curl(serve_stack: str) -> None:
    env = {**os.environ, "ACS_API_BASE": BASE, "ACS_API_KEY": serve_stack}
    command = (
        'curl -s "$ACS_API_BASE/completions" -H "Authorization: Bearer $ACS_API_KEY" '
        '-H "Content-Type: application/json" '
        "-d '{\"model\": \"llama-8b\", \"prompt\": \"The sky is\", \"max_tokens\": 2, \"logprobs\": 1}'"
    )
    out = subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True, timeout=60, check=True)
    completion = json.loads(out.stdout)
    validate(completion, "Completion")
    assert completion["usage"] == {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}


def test_models_and_status(serve_stack: str) -> None:
    listing = httpx.get(f"{BASE}/models", headers=auth(serve_stack)).json()
    validate(listing, "ModelList")
    assert [m["id"] for m in listing["data"]] == ["tiny-llama"]
    assert listing["data"][0]["capabilities"]["n_layers"] == 4
    for name in ("tiny-llama", "acs/tiny-llama-random", "acs%2Ftiny-llama-random"):
        model = httpx.get(f"{BASE}/models/{name}", headers=auth(serve_stack))
        assert model.status_code == 200, model.text
        validate(model.json(), "Model")
    status = httpx.get(f"{BASE}/models/acs/tiny-llama-random/status", headers=auth(serve_stack)).json()
    validate(status, "ModelStatus")
    assert status == {"id": "tiny-llama", "object": "model.status", "warm": True, "boot": None, "activation_boot": None}


def test_health(serve_stack: str) -> None:
    r = httpx.get(f"http://127.0.0.1:{PORT}/health")
    assert r.status_code == 200
    validate(r.json(), "Health")
    assert r.json()["backends"][0]["breaker_state"] == "closed"


def test_refusal_through_serve(serve_stack: str) -> None:
    r = httpx.post(f"{BASE}/completions", headers=auth(serve_stack),
                   json={"model": "llama-8b", "prompt": "The sky is", "max_tokens": "2"})
    assert_error(r, 400, "invalid_request", message="Invalid type for 'max_tokens': expected a number.",
                 param="max_tokens", type="invalid_request_error")
    r = httpx.post(f"{BASE}/completions", json={"prompt": "x"})
    assert_error(r, 401, "missing_authorization")


def test_request_id_through_the_proxy(serve_stack: str) -> None:
    mine = httpx.get(f"{BASE}/models", headers={**auth(serve_stack), "X-Request-Id": "my-id_1"})
    assert mine.headers.get_list("x-request-id") == ["my-id_1"]
    bad = httpx.get(f"{BASE}/models", headers={**auth(serve_stack), "X-Request-Id": "not valid!"})
    (generated,) = bad.headers.get_list("x-request-id")
    assert generated.startswith("req_") and len(generated) == 36


def test_a_closed_stream_frees_its_place(serve_stack: str) -> None:
    """The client leaves mid-stream: the request stops and leaves the model's in-flight count."""
    import time

    body = {"prompt": "The sky is", "max_tokens": 1500, "stream": True, "temperature": 0}
    with httpx.stream("POST", f"{BASE}/completions", json=body, headers=auth(serve_stack), timeout=60) as r:
        lines = r.iter_lines()
        assert next(line for line in lines if line.startswith("data: "))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        backend = httpx.get(f"http://127.0.0.1:{PORT}/health").json()["backends"][0]
        if backend["in_flight"] == 0:
            return
        time.sleep(0.2)
    raise AssertionError(f"the cut stream still counts as in flight: {backend}")

