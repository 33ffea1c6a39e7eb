"""The JSON of a Run, as the App's /account/runs routes answer it and its stream sends it.

    {"id", "object": "playground.run", "number", "group_id", "status", "model",
     "request": the exact body of POST /v1/completions,
     "seed": the seed it samples with (the request's, or one chosen at its start),
     "completion_id", "choices": [the API's choice objects, each as it grows],
     "usage": the API's usage so far, "used_tokens", "error": the error object of a failed Run,
     "activations": {"expires_at"} while they are kept (GET .../activations reads them), or null,
     "created_at", "started_at", "finished_at"}

`status` is queued, running, completed, failed or stopped. A list leaves out each choice's
`logprobs` and `prompt_logprobs` (`logprobs` false): the Runs table shows text and tokens, and a
read of one Run has the rest.
"""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from domain.operations.documents import iso
from ledger.work.tables import PlaygroundRun

OBJECT = "playground.run"
LOGPROB_FIELDS = ("logprobs", "prompt_logprobs")


def _json_or_none(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def activations_kept(run: PlaygroundRun, now: datetime) -> bool:
    return run.activations_expire_at is not None and run.activations_expire_at > now


def run_json(run: PlaygroundRun, now: datetime, *, logprobs: bool = True) -> dict[str, Any]:
    choices = json.loads(run.choices)
    if not logprobs:
        choices = [{key: value for key, value in choice.items() if key not in LOGPROB_FIELDS} for choice in choices]
    return {
        "id": str(run.id),
        "object": OBJECT,
        "number": run.number,
        "group_id": None if run.group_id is None else str(run.group_id),
        "status": run.status.value,
        "model": run.model,
        "request": json.loads(run.request),
        "seed": run.seed,
        "completion_id": run.completion_id or None,
        "choices": choices,
        "usage": _json_or_none(run.usage),
        "used_tokens": run.used_tokens,
        "error": _json_or_none(run.error),
        "activations": {"expires_at": iso(run.activations_expire_at)} if activations_kept(run, now) else None,
        "created_at": iso(run.created_at),
        "started_at": iso(run.started_at),
        "finished_at": iso(run.finished_at),
    }


def deleted_json(run: PlaygroundRun) -> dict[str, Any]:
    return {"id": str(run.id), "object": OBJECT, "number": run.number, "deleted": True}


def completion_json(run: PlaygroundRun) -> dict[str, Any] | None:
    """The Run's Completion in the shape that POST /v1/completions answers; None before it started."""
    if not run.completion_id:
        return None
    started = run.started_at or run.created_at
    return {"id": run.completion_id, "object": "text_completion", "created": int(started.timestamp()),
            "model": run.served_model, "choices": json.loads(run.choices), "usage": _json_or_none(run.usage)}
