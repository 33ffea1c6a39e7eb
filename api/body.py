"""Reading a request body: capped as it streams in, JSON whatever its type."""
from __future__ import annotations

import json
import re
import sys
from typing import Any

from fastapi import Request

from domain import errors

TOO_LARGE = "The request body is larger than {limit} bytes."
NOT_JSON = "The request body is not valid JSON: {detail}."
TOO_DEEP = "it nests arrays or objects too deeply"
TOO_MANY_DIGITS = "it has a number of more than {digits} digits"
SURROGATE = "Invalid value for '{path}': expected a text without half of a surrogate pair, such as a lone \\ud800."
SURROGATE_NAME = "Invalid field name: a field name cannot hold half of a surrogate pair, such as a lone \\ud800."


async def read_capped(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise errors.RequestTooLarge(TOO_LARGE.format(limit=limit))
    chunks, size = [], 0
    # A chunked body has no Content-Length: count as it arrives.
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise errors.RequestTooLarge(TOO_LARGE.format(limit=limit))
        chunks.append(chunk)
    return b"".join(chunks)


def parse_json(raw: bytes) -> Any:
    """The body as JSON, with no lone surrogate in any text: every route's fields are clean."""
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        detail = getattr(error, "msg", None) or str(error)
        raise errors.BadJson(NOT_JSON.format(detail=detail)) from error
    except RecursionError:
        # json.loads recurses once per level: a body of 200,000 `[` is no JSON a route takes.
        raise errors.BadJson(NOT_JSON.format(detail=TOO_DEEP)) from None
    except ValueError:
        # Past sys.get_int_max_str_digits() (4300) Python refuses to read an integer, with a ValueError
        # that is no JSONDecodeError; no field takes such a number.
        detail = TOO_MANY_DIGITS.format(digits=sys.get_int_max_str_digits())
        raise errors.BadJson(NOT_JSON.format(detail=detail)) from None
    refuse_lone_surrogates(value)
    return value


def refuse_lone_surrogates(value: Any) -> None:
    """400 for the first text (or field name) that holds half of a surrogate pair, such as the
    JSON escape \\ud800: no tokenizer, database or answer can encode it as UTF-8."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:  # iterative: a body nested 1,000 levels deep must not recurse here either
        path, item = stack.pop()
        if isinstance(item, str) and not _encodes(item):
            raise errors.InvalidRequest(SURROGATE.format(path=path or "body"), _top_field(path))
        if isinstance(item, dict):
            for key, child in item.items():
                child_path = f"{path}.{key}" if path else key
                if not _encodes(key):
                    raise errors.InvalidRequest(SURROGATE_NAME, _top_field(path) or None)
                stack.append((child_path, child))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", child) for i, child in enumerate(item))


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _top_field(path: str) -> str | None:
    """The top-level field of a path such as 'apply_steering_vectors[0].name' (the error's param)."""
    return re.split(r"[.\[]", path, maxsplit=1)[0] or None


async def read_json(request: Request, limit: int) -> Any:
    return parse_json(await read_capped(request, limit))
