"""Checks against the spec itself: schemas of openapi.json, the error object."""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema

SPEC = Path(__file__).resolve().parent.parent / "api" / "openapi.json"


@lru_cache
def openapi() -> dict[str, Any]:
    return json.loads(SPEC.read_text())


def validate(instance: Any, schema_name: str) -> None:
    """Raise unless `instance` fits components.schemas[schema_name]."""
    schema = {"$ref": f"#/components/schemas/{schema_name}", "components": openapi()["components"]}
    jsonschema.Draft202012Validator(schema).validate(instance)


def assert_error(response: Any, status: int, code: str | None, *, message: str | re.Pattern | None = None,
                 param: Any = "unset", type: str | None = None, headers: dict[str, str] | None = None,
                 request_id: str | None = None) -> dict:
    """The one helper for every error path: status, error object, request id, headers.

    `request_id` is the id the body must carry when it is not the answer's own
    X-Request-Id (a Job's result carries the Job's).
    """
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    validate(body, "ErrorResponse")
    error = body["error"]
    assert error["code"] == code, error
    if isinstance(message, re.Pattern):
        assert message.search(error["message"]), error["message"]
    elif message is not None:
        assert error["message"] == message, error["message"]
    if param != "unset":
        assert error["param"] == param, error
    if type is not None:
        assert error["type"] == type, error
    assert body["request_id"] == (request_id or response.headers["x-request-id"])
    for name, value in (headers or {}).items():
        assert response.headers.get(name) == value, (name, response.headers.get(name))
    return error
