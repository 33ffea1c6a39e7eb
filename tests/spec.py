"""Checks against the spec itself: schemas of openapi.json, the error object,
and the project's shared spec beside the checkout (`shared_spec`)."""
from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

SPEC = Path(__file__).resolve().parent.parent / "api" / "openapi.json"
# The project's spec, `../shared/spec` beside the checkout; api/openapi.json
# is the copy a bare clone has (the app serves it).
SHARED_SPEC = Path(__file__).resolve().parents[2] / "shared" / "spec"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def shared_spec(name: str) -> Path:
    """The shared spec's file `name`; a test without it skips, saying why, or fails in CI.

    CI's clean clone has ../shared beside it: there a missing spec is a broken
    checkout, and a skip would hide that the copies went unchecked.
    """
    path = SHARED_SPEC / name
    if path.is_file():
        return path
    reason = f"no shared spec beside this checkout: {path} is missing"
    if in_ci():
        pytest.fail(f"{reason}, and CI={os.environ['CI']!r} says this is CI's clone, which has it")
    pytest.skip(reason)


def spec_docs() -> str:
    """The text of the spec's docs.md, read from the shared spec (skips or fails as `shared_spec`)."""
    return shared_spec("docs.md").read_text()


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
