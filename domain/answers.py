"""What a use case answers, without HTTP: a JSON document (or a body already rendered, such as a
replayed answer or a Job's kept result), its status and its headers, where the spec gives them
(202 and Location for a Job, Retry-After while it waits, the clamp header). `api/answers.py` renders
it; nothing here knows how."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ledger.work.idempotency import Replay


@dataclass(frozen=True)
class Answer:
    body: Any  # a JSON-able document, or `Rendered` bytes sent as they are
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Rendered:
    """A JSON body rendered already, sent byte for byte."""

    data: bytes


def replayed(replay: Replay) -> Answer:
    """An Idempotency-Key's first answer again: its status, its body byte for byte, its kept headers."""
    return Answer(Rendered(replay.body.encode()), replay.status, dict(replay.headers))
