"""Serve's proxy answers a request whose ingress replica died with its own plain-text 500; the
proxy's middleware (cluster/proxy_middleware.py) answers the spec's error object instead, as the
chaos soak found (bench/NOTES.md). Tested on the middlewares as Serve stacks them, around an app
that answers as Serve's proxy does."""
from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.middleware import Middleware

from cluster.proxy_middleware import middlewares

SERVES_OWN_500 = [
    {"type": "http.response.start", "status": 500, "headers": [(b"content-type", b"text/plain; charset=utf-8")]},
    {"type": "http.response.body", "body": b"Internal Server Error", "more_body": True},
    {"type": "http.response.body", "body": b""},
]


def answering(messages: list[dict], then_raise: Exception | None = None) -> Any:
    async def app(scope: dict, receive: Any, send: Any) -> None:
        for message in messages:
            await send(message)
        if then_raise is not None:
            raise then_raise
    return app


async def call(messages: list[dict], headers: list[tuple[bytes, bytes]] = [],
               then_raise: Exception | None = None) -> tuple[dict, bytes]:
    app = answering(messages, then_raise)
    for middleware in middlewares():  # as Serve applies them: the last one outermost
        assert isinstance(middleware, Middleware)
        app = middleware.cls(app, *middleware.args, **middleware.kwargs)
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    async def receive() -> dict:
        return {"type": "http.disconnect"}

    await app({"type": "http", "method": "POST", "path": "/v1/completions", "headers": headers}, receive, send)
    start = sent[0]
    assert start["type"] == "http.response.start"
    return start, b"".join(m.get("body", b"") for m in sent[1:])


def header_values(start: dict, name: bytes) -> list[bytes]:
    return [v for k, v in start["headers"] if k.lower() == name]


async def test_serves_own_500_becomes_the_error_object_with_the_callers_request_id() -> None:
    start, body = await call(SERVES_OWN_500, [(b"x-request-id", b"req_chaos_1")])
    assert start["status"] == 500
    assert header_values(start, b"content-type") == [b"application/json"]
    assert header_values(start, b"x-should-retry") == [b"false"]
    assert header_values(start, b"x-request-id") == [b"req_chaos_1"]
    assert header_values(start, b"content-length") == [str(len(body)).encode()]
    assert json.loads(body) == {
        "error": {"message": "The API failed while it handled the request.", "type": "internal_error",
                  "param": None, "code": "internal_error"},
        "request_id": "req_chaos_1",
    }


async def test_no_answer_from_the_proxy_is_the_error_object_too() -> None:
    """A replica that died: Serve's proxy sends nothing for its 500, and uvicorn would write its own."""
    for then_raise in (None, RuntimeError("The actor died unexpectedly before finishing this task.")):
        start, body = await call([], [(b"x-request-id", b"req_chaos_2")], then_raise)
        assert start["status"] == 500
        assert header_values(start, b"x-should-retry") == [b"false"]
        assert json.loads(body)["error"]["code"] == "internal_error"
        assert json.loads(body)["request_id"] == "req_chaos_2"


async def test_an_exception_after_the_answer_began_goes_on_to_the_server() -> None:
    started = [{"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]}]
    with pytest.raises(RuntimeError):
        await call(started, then_raise=RuntimeError("cut"))


async def test_the_error_object_gets_the_id_the_guard_made_when_the_caller_sent_none() -> None:
    start, body = await call(SERVES_OWN_500)
    [made] = header_values(start, b"x-request-id")
    assert json.loads(body)["request_id"] == made.decode()


async def test_the_apis_own_answers_pass_unchanged() -> None:
    error = json.dumps({"error": {"message": "m", "type": "upstream_error", "param": None,
                                  "code": "upstream_unreachable"}, "request_id": "r"}).encode()
    for status, content_type, body in [
        (502, b"application/json", error),
        (200, b"text/event-stream; charset=utf-8", b"data: [DONE]\n\n"),
        (404, b"text/html; charset=utf-8", b"<!doctype html>"),
        (200, b"text/plain; charset=utf-8", b"ok"),
    ]:
        start, sent = await call([
            {"type": "http.response.start", "status": status, "headers": [(b"content-type", content_type)]},
            {"type": "http.response.body", "body": body},
        ])
        assert (start["status"], header_values(start, b"content-type"), sent) == (status, [content_type], body)
