"""Reading an admin route's JSON body, path ids and query strictly, as the rest of the API reads its own.

An unknown field is a 400 with the field as `param`; `null` stands for a field's default.
The values go through the same readers as the command line's (`domain.operations.arguments`),
so both accept `50K` for tokens and `Hiring 2026 08` for a tag.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import date
from typing import Any, TypeVar

from fastapi import Request

from domain import errors
from api.auth import services_of
from api.body import parse_json, read_capped
from domain.completions.validation import Msg, bad_type, bad_value, reject_unknown_fields, text
from domain.operations import arguments

T = TypeVar("T")
EXAMPLE_ID = "01a12e70-9370-7a9b-87d6-4c3d2621969e"


async def read_fields(request: Request, known: tuple[str, ...]) -> dict[str, Any]:
    """The body's fields; an empty body is `{}`, so actions without fields need none."""
    raw = await read_capped(request, services_of(request).settings.max_body_bytes)
    if not raw.strip():
        return {}
    body = parse_json(raw)
    if not isinstance(body, dict):
        raise errors.InvalidRequest(Msg.BODY)
    reject_unknown_fields(body, known)
    return body


def required(body: dict[str, Any], name: str) -> Any:
    if body.get(name) is None:
        raise errors.InvalidRequest(Msg.MISSING.format(path=name), name)
    return body[name]


def optional_text(body: dict[str, Any], name: str, default: str = "") -> str:
    value = body.get(name)
    return default if value is None else text(value, name)


def read_as(reader: Callable[..., T], value: Any, name: str, **options: Any) -> T:
    """A value read as the command line reads it; its refusal names the field (400 with `param` `name`)."""
    return arguments.read_field(reader, value, name, **options)


def tokens(body: dict[str, Any], name: str, *, least: int) -> int:
    value = required(body, name)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise bad_type(name, "a whole number of tokens, or a text such as 50K or 2.5M")
    return read_as(arguments.tokens, value, name, least=least)


def path_id(value: str, name: str, what: str) -> uuid.UUID:
    """A path id; one that is not a UUID is not valid (400, as DESIGN.md decided for every path id)."""
    try:
        return uuid.UUID(value)
    except ValueError:
        raise bad_value(name, f"{what}, a UUID such as {EXAMPLE_ID}") from None


def optional_id(body_or_query: dict[str, Any], name: str, what: str) -> uuid.UUID | None:
    value = body_or_query.get(name)
    if value is None:
        return None
    return path_id(text(value, name), name, what)


def query_day(request: Request, name: str) -> date | None:
    value = request.query_params.get(name)
    return None if value is None else read_as(arguments.day, value, name)


def query_flag(request: Request, name: str) -> bool:
    value = request.query_params.get(name, "false").lower()
    if value not in ("true", "false"):
        raise bad_value(name, "true or false")
    return value == "true"


def read_query(request: Request, known: tuple[str, ...]) -> dict[str, str]:
    """The query's parameters; one that the route does not know is a 400, as a body's field."""
    query = dict(request.query_params)
    reject_unknown_fields(query, known)
    return query
