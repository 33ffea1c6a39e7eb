"""The served model of the request being answered: the `model` label of its series.

The middleware opens a holder for each request; `Services.resolve_model` fills it
in whichever route resolves a model (Completions, Jobs, harvests, Loom Branches,
a model's status). A context variable carries it there, threads included
(`asyncio.to_thread` copies the context, and the holder in it is shared).
Only catalog ids reach it, so the label keeps a few values whatever callers send.
"""
from __future__ import annotations

import contextlib
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Iterator


@dataclass
class RequestModel:
    id: str = ""  # none resolved (yet)


_CURRENT: ContextVar[RequestModel | None] = ContextVar("acs_request_model", default=None)


@contextlib.contextmanager
def request_model() -> Iterator[RequestModel]:
    model = RequestModel()
    token = _CURRENT.set(model)
    try:
        yield model
    finally:
        _CURRENT.reset(token)


def note_model(model_id: str) -> None:
    """The first model a request resolves is its label; outside a request (the Runner) nothing happens."""
    model = _CURRENT.get()
    if model is not None and not model.id:
        model.id = model_id
