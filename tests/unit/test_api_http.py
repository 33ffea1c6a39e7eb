"""What every HTTP answer of the API carries, seen as a user sees it:
the request id, CORS, gzip, the open routes (/openapi.json, /health), the
model routes, and the answers for an unknown route, a wrong method and chat.

All over the fake engine (tests/fakes.py), in process.
"""
from __future__ import annotations

import gzip
import json
import re

import httpx
import pytest

from tests.spec import assert_error, shared_spec, validate

SKY = {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2}
GENERATED_ID = re.compile(r"^req_[0-9a-f]{32}$")
ORIGIN = {"Origin": "https://page.example"}
EXPOSED = ["X-Request-Id", "Retry-After", "retry-after-ms", "X-Should-Retry", "X-Acs-Max-Tokens-Clamped"]
NOT_SERVED = "The model `gpt-2` does not exist. The API serves tiny-llama."
CHAT_MESSAGE = (
    "This API serves Base models, which have no chat format: send POST /v1/completions "
    "with a prompt instead of POST /v1/chat/completions with messages."
)




def with_id(stack, request_id: str) -> dict[str, str]:
    return {**stack.auth(), "X-Request-Id": request_id}


async def complete(stack, headers: dict[str, str] | None = None, **fields) -> httpx.Response:
    return await stack.http.post("/v1/completions", headers=headers or stack.auth(), json={**SKY, **fields})


async def raw_bytes(stack, method: str, url: str, **kwargs) -> tuple[httpx.Response, bytes]:
    """The answer and its body as it came over the wire, before httpx decodes it."""
    async with stack.http.stream(method, url, **kwargs) as response:
        raw = b"".join([chunk async for chunk in response.aiter_raw()])
    return response, raw


def exposed_headers(response: httpx.Response) -> list[str]:
    value = response.headers.get("access-control-expose-headers", "")
    return [name.strip().lower() for name in value.split(",")]


# X-Request-Id ------------------------------------------------------------------

async def test_success_has_a_new_request_id(fake_stack):
    response = await complete(fake_stack)
    assert response.status_code == 200, response.text
    assert GENERATED_ID.match(response.headers["x-request-id"])


async def test_each_request_gets_its_own_id(fake_stack):
    first = await fake_stack.http.get("/v1/models", headers=fake_stack.auth())
    second = await fake_stack.http.get("/v1/models", headers=fake_stack.auth())
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


@pytest.mark.parametrize("caller_id", ["trace-01_AB", "x", "a" * 64])
async def test_caller_id_is_kept(fake_stack, caller_id):
    response = await complete(fake_stack, with_id(fake_stack, caller_id))
    assert response.status_code == 200
    assert response.headers["x-request-id"] == caller_id


@pytest.mark.parametrize("caller_id", ["a" * 65, "has space", "", "dot.ted", "é"])
async def test_caller_id_is_replaced_when_not_valid(fake_stack, caller_id):
    headers = {**fake_stack.auth(), "X-Request-Id": caller_id.encode()}
    response = await fake_stack.http.get("/v1/models", headers=headers)
    assert response.status_code == 200
    assert GENERATED_ID.match(response.headers["x-request-id"])


async def test_caller_id_is_in_the_error_body(fake_stack):
    response = await complete(fake_stack, with_id(fake_stack, "my-trace-1"), model="gpt-2")
    assert_error(response, 400, "model_not_found")
    assert response.json()["request_id"] == "my-trace-1"


async def test_request_id_on_400(fake_stack):
    assert_error(await complete(fake_stack, temprature=0), 400, "invalid_request")


async def test_request_id_on_401(fake_stack):
    response = await fake_stack.http.get("/v1/models", headers={"X-Request-Id": "no-key-1"})
    assert_error(response, 401, "missing_authorization")
    assert response.headers["x-request-id"] == "no-key-1"


async def test_request_id_on_404(fake_stack):
    assert_error(await fake_stack.http.get("/v1/nothing-here"), 404, None)


def spec_routes() -> list[tuple[str, list[str]]]:
    """Each path of the spec's openapi.json with the methods that it lists."""
    spec = json.loads(shared_spec("openapi.json").read_text())
    verbs = ("get", "post", "put", "patch", "delete")
    return [(path, sorted(m.upper() for m in ops if m in verbs)) for path, ops in spec["paths"].items()]


async def test_a_405_lists_every_method_of_the_path(fake_stack):
    """The spec: "The Allow header lists the methods that it takes." (PUT /v1/looms named only GET.)"""
    routes = spec_routes()
    patterns = [(re.compile("^" + re.sub(r"\{[a-z_]+\}", "[^/]+", path) + "$"), methods) for path, methods in routes]
    checked = 0
    for path, _ in routes:
        url = re.sub(r"\{[a-z_]+\}", "0190f5b2-7c3d-7e4f-8a9b-0123456789ab", path)
        # GET /v1/looms/import reads the Loom whose id is "import": another path's method.
        taken = {m for pattern, others in patterns if pattern.match(url) for m in others}
        for method in {"GET", "POST", "PUT", "PATCH", "DELETE"} - taken:
            response = await fake_stack.http.request(method, url, headers=fake_stack.auth())
            assert_error(response, 405, None)
            assert response.headers["allow"] == ", ".join(sorted(taken)), (method, path)
            checked += 1
    assert checked >= 80


async def test_request_id_on_405(fake_stack):
    assert_error(await fake_stack.http.get("/v1/completions", headers=fake_stack.auth()), 405, None)


async def test_request_id_on_413(fake_stack):
    response = await fake_stack.http.post("/v1/completions", headers=fake_stack.auth(),
                                          content=b" " * (8 * 1024 * 1024 + 1))
    assert_error(response, 413, "request_too_large")


async def _failing_app(stack) -> httpx.AsyncClient:
    """A client that sees the API's last-resort 500 (the app raises inside)."""
    class Broken:
        def get(self, model):
            raise RuntimeError("a bug")

    stack.replace_services(tokenizers=Broken())
    transport = httpx.ASGITransport(app=stack.app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://api.test")


async def test_request_id_on_500(fake_stack):
    async with await _failing_app(fake_stack) as client:
        response = await client.post("/v1/completions", json=SKY, headers=with_id(fake_stack, "crash-1"))
    error = assert_error(response, 500, "internal_error", type="internal_error",
                         headers={"x-should-retry": "false"})
    assert error["param"] is None
    assert response.headers["x-request-id"] == "crash-1"


# CORS ------------------------------------------------------------------------------

async def test_cors_allows_every_origin(fake_stack):
    response = await fake_stack.http.get("/v1/models", headers={**fake_stack.auth(), **ORIGIN})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "*"


async def test_cors_on_an_error(fake_stack):
    response = await fake_stack.http.get("/v1/models", headers=ORIGIN)
    assert response.status_code == 401
    assert response.headers["access-control-allow-origin"] == "*"


async def test_cors_exposes_the_spec_headers(fake_stack):
    response = await complete(fake_stack, {**fake_stack.auth(), **ORIGIN})
    assert response.status_code == 200
    exposed = exposed_headers(response)
    for name in EXPOSED:
        assert name.lower() in exposed, (name, exposed)


async def test_cors_on_a_500(fake_stack):
    async with await _failing_app(fake_stack) as client:
        response = await client.post("/v1/completions", json=SKY, headers={**fake_stack.auth(), **ORIGIN})
    assert response.status_code == 500
    assert response.headers.get("access-control-allow-origin") == "*"


@pytest.mark.parametrize("path,method", [("/v1/completions", "POST"), ("/health", "GET"),
                                         ("/openapi.json", "GET"), ("/v1/models", "GET")])
async def test_cors_preflight_succeeds(fake_stack, path, method):
    headers = {**ORIGIN, "Access-Control-Request-Method": method,
               "Access-Control-Request-Headers": "authorization, content-type, x-request-id"}
    response = await fake_stack.http.options(path, headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["access-control-allow-origin"] == "*"
    assert method in response.headers["access-control-allow-methods"]
    allowed = response.headers["access-control-allow-headers"].lower()
    assert "authorization" in allowed and "content-type" in allowed
    assert "x-request-id" in response.headers


# gzip ----------------------------------------------------------------------------------

async def test_large_json_is_gzipped(fake_stack):
    headers = {**fake_stack.auth(), "Accept-Encoding": "gzip"}
    response, raw = await raw_bytes(fake_stack, "GET", "/v1/models", headers=headers)
    assert response.status_code == 200
    assert response.headers["content-encoding"] == "gzip"
    assert int(response.headers["content-length"]) == len(raw)
    body = gzip.decompress(raw)
    assert len(body) >= 500
    validate(httpx.Response(200, content=body).json(), "ModelList")


async def test_small_json_is_not_gzipped(fake_stack):
    response, raw = await raw_bytes(fake_stack, "GET", "/v1/models", headers={"Accept-Encoding": "gzip"})
    assert response.status_code == 401
    assert len(raw) < 500
    assert "content-encoding" not in response.headers
    assert b"missing_authorization" in raw


async def test_nothing_is_gzipped_without_accept_encoding(fake_stack):
    headers = {**fake_stack.auth(), "Accept-Encoding": "identity"}
    response, raw = await raw_bytes(fake_stack, "GET", "/v1/models", headers=headers)
    assert "content-encoding" not in response.headers
    assert raw.startswith(b"{")


async def test_gzip_refused_with_q_0_is_not_sent(fake_stack):
    headers = {**fake_stack.auth(), "Accept-Encoding": "gzip;q=0, identity"}
    response, raw = await raw_bytes(fake_stack, "GET", "/v1/models", headers=headers)
    assert "content-encoding" not in response.headers
    assert raw.startswith(b"{")


async def test_a_stream_is_never_gzipped(fake_stack):
    headers = {**fake_stack.auth(), "Accept-Encoding": "gzip"}
    body = {**SKY, "max_tokens": 60, "stream": True, "logprobs": 5}  # well over 500 bytes
    response, raw = await raw_bytes(fake_stack, "POST", "/v1/completions", headers=headers, json=body)
    assert response.status_code == 200
    assert "content-encoding" not in response.headers
    assert response.headers["content-type"].startswith("text/event-stream")
    assert len(raw) > 500
    assert raw.startswith(b"data: ") and raw.endswith(b"data: [DONE]\n\n")


# Routes without a key ------------------------------------------------------------------

async def test_openapi_json_without_a_key(fake_stack):
    response = await fake_stack.http.get("/openapi.json")
    assert response.status_code == 200
    spec = response.json()
    assert spec["openapi"] == "3.1.0"
    assert len(spec["paths"]) == 23


async def test_the_served_spec_is_the_shared_specs(fake_stack):
    """The route serves the copy in api/, which the schema checks read too: it must be the project's spec."""
    shared = shared_spec("openapi.json")
    response = await fake_stack.http.get("/openapi.json")
    assert response.status_code == 200
    assert response.json() == json.loads(shared.read_text()), "copy ../shared/spec/openapi.json to api/"


async def test_health_without_a_key(fake_stack):
    response = await fake_stack.http.get("/health")
    assert response.status_code == 200
    health = response.json()
    validate(health, "Health")
    assert health["status"] == "ok"
    assert health["wrapper"]["database"]["ok"] is True
    assert health["degraded_backends"] == [] and health["degraded_reasons"] == []
    [backend] = health["backends"]
    assert backend["model_id"] == "tiny-llama"
    assert backend["breaker_state"] == "closed"
    assert backend["breaker_consecutive_failures"] == 0
    assert backend["breaker_open_seconds"] is None
    assert backend["in_flight"] == 0


# Models ----------------------------------------------------------------------------------

async def test_list_models(fake_stack):
    response = await fake_stack.http.get("/v1/models", headers=fake_stack.auth())
    assert response.status_code == 200
    models = response.json()
    validate(models, "ModelList")
    [model] = models["data"]
    assert model["id"] == "tiny-llama"
    assert model["served_model_name"] == "acs/tiny-llama-random"
    assert model["default"] is True
    assert model["capabilities"]["max_model_len"] == 2048
    assert model["capabilities"]["chat_template"] is None


async def test_list_models_needs_a_key(fake_stack):
    assert_error(await fake_stack.http.get("/v1/models"), 401, "missing_authorization")


@pytest.mark.parametrize("name", ["tiny-llama", "llama-8b", "acs/tiny-llama-random", "acs%2Ftiny-llama-random"])
async def test_get_model_by_id_alias_or_served_name(fake_stack, name):
    response = await fake_stack.http.get(f"/v1/models/{name}", headers=fake_stack.auth())
    assert response.status_code == 200, response.text
    model = response.json()
    validate(model, "Model")
    assert model["id"] == "tiny-llama"


async def test_get_model_is_the_list_entry(fake_stack):
    listed = (await fake_stack.http.get("/v1/models", headers=fake_stack.auth())).json()["data"][0]
    one = (await fake_stack.http.get("/v1/models/tiny-llama", headers=fake_stack.auth())).json()
    assert one == listed


async def test_get_unknown_model(fake_stack):
    response = await fake_stack.http.get("/v1/models/gpt-2", headers=fake_stack.auth())
    assert_error(response, 400, "model_not_found", message=NOT_SERVED, param="model", type="invalid_request_error")


@pytest.mark.parametrize("path", ["/v1/models/a%0Ab", "/v1/models/%0Agpt/status", "/v1/models/gpt%0A/status"])
async def test_a_model_id_with_a_line_feed_is_an_unknown_model(fake_stack, path):
    """The fuzzing tier found these answered 404 "No route has the path": a path's `.*` stops at a line feed."""
    response = await fake_stack.http.get(path, headers=fake_stack.auth())
    assert_error(response, 400, "model_not_found", param="model", message=re.compile(r"^The model `.*\n.*` does not"))


async def test_completion_with_unknown_model(fake_stack):
    response = await complete(fake_stack, model="gpt-2")
    assert_error(response, 400, "model_not_found", message=NOT_SERVED, param="model", type="invalid_request_error")


async def test_openai_sdk_sees_model_not_found(fake_stack):
    import openai

    with pytest.raises(openai.BadRequestError) as info:
        await fake_stack.openai().completions.create(model="gpt-2", prompt="The sky is")
    assert (info.value.status_code, info.value.code, info.value.param) == (400, "model_not_found", "model")
    assert info.value.request_id


@pytest.mark.parametrize("name", ["tiny-llama", "llama-8b", "acs%2Ftiny-llama-random"])
async def test_model_status(fake_stack, name):
    response = await fake_stack.http.get(f"/v1/models/{name}/status", headers=fake_stack.auth())
    assert response.status_code == 200, response.text
    status = response.json()
    validate(status, "ModelStatus")
    assert status == {"id": "tiny-llama", "object": "model.status", "warm": True, "boot": None,
                      "activation_boot": None}


async def test_model_status_of_unknown_model(fake_stack):
    response = await fake_stack.http.get("/v1/models/gpt-2/status", headers=fake_stack.auth())
    assert_error(response, 400, "model_not_found", message=NOT_SERVED, param="model")


# Routes and methods --------------------------------------------------------------------------

async def test_unknown_route(fake_stack):
    response = await fake_stack.http.get("/v1/nothing-here", headers=fake_stack.auth())
    error = assert_error(response, 404, None, type="invalid_request_error")
    assert error["param"] is None


async def test_wrong_method(fake_stack):
    response = await fake_stack.http.get("/v1/completions", headers=fake_stack.auth())
    error = assert_error(response, 405, None, type="invalid_request_error")
    assert "POST" in [m.strip() for m in response.headers["allow"].split(",")]
    assert error["param"] is None


async def test_wrong_method_on_models(fake_stack):
    response = await fake_stack.http.delete("/v1/models", headers=fake_stack.auth())
    assert_error(response, 405, None)
    assert "GET" in response.headers["allow"]


async def test_chat_completions_refused_without_a_key(fake_stack):
    body = {"model": "llama-8b", "messages": [{"role": "user", "content": "Hi"}]}
    response = await fake_stack.http.post("/v1/chat/completions", json=body)
    error = assert_error(response, 400, "chat_completions_unsupported", message=CHAT_MESSAGE,
                         type="invalid_request_error")
    assert error["param"] is None


async def test_chat_completions_refused_with_the_sdk(fake_stack):
    import openai

    with pytest.raises(openai.BadRequestError) as info:
        await fake_stack.openai().chat.completions.create(model="llama-8b",
                                                          messages=[{"role": "user", "content": "Hi"}])
    assert info.value.code == "chat_completions_unsupported"
    assert info.value.message.endswith(CHAT_MESSAGE) or CHAT_MESSAGE in info.value.message
