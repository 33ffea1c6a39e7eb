"""The engine side's neutral refusals, raised as the API's own errors.

The checks below the API (`deployments/checks.py`) raise `EngineRefused`;
the API's code that calls them runs inside `as_api_errors()`, which maps
through `api.error_mapping`, the one place that knows both sides.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

from deployments.engine import EngineRefused


@contextlib.contextmanager
def as_api_errors() -> Iterator[None]:
    from api.error_mapping import refusal_error

    try:
        yield
    except EngineRefused as refusal:
        raise refusal_error(refusal) from None
