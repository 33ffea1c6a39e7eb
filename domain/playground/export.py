"""Export Runs as a file (spec: "Export Runs"): the Runs in view or chosen (`ids`), or every Run
that the User kept (`every`), oldest first.

| Format | What it holds |
| json   | A list with one object for each Run: its request, its Completion in the shape that     |
|        | POST /v1/completions answers, its usage and its status. Chosen Runs' Completions carry |
|        | their Activations while they are kept, in the API's encoding; every Run's, none.       |
| jsonl  | One line for each choice, for pandas.read_json(path, lines=True)                       |
| text   | The text of each choice, with its prompt, to read                                      |
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from domain import errors
from domain.completions.validation import bad_value
from domain.playground.views import activations_kept, completion_json
from domain.services import Services
from domain.operations.documents import iso
from ledger.work import runs
from ledger.work.tables import PlaygroundRun

FORMATS = ("json", "jsonl", "text")
MEDIA_TYPES = {"json": "application/json", "jsonl": "application/x-ndjson", "text": "text/plain; charset=utf-8"}
FILE_ENDINGS = {"json": "json", "jsonl": "jsonl", "text": "txt"}
NO_RUNS_NAMED = "Name the Runs to export: ids, a list of Run ids separated by commas, or every=true."


@dataclass(frozen=True)
class ExportFile:
    content: str
    media_type: str
    filename: str


def parse_format(value: str | None) -> str:
    if value not in FORMATS:
        raise bad_value("format", "json, jsonl or text")
    return value


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def prompt_of(request: dict[str, Any], index: int) -> Any:
    """The prompt that choice `index` continues: choice i of prompt p is index p * n + i, as the
    API numbers them. A prompt of token ids is that list of ids."""
    prompt = request.get("prompt", "")
    n = request.get("n") or 1
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], (str, list)):
        position = index // n
        return prompt[position] if position < len(prompt) else ""
    return prompt


def _choices(run: PlaygroundRun) -> list[dict[str, Any]]:
    return json.loads(run.choices)


def _run_object(run: PlaygroundRun, stored_activations: str | None) -> dict[str, Any]:
    completion = completion_json(run)
    if completion is not None and stored_activations is not None:
        completion["activations"] = json.loads(stored_activations)
    return {"id": str(run.id), "number": run.number, "group_id": None if run.group_id is None else str(run.group_id),
            "status": run.status.value, "model": run.model, "request": json.loads(run.request),
            "completion": completion, "usage": None if run.usage is None else json.loads(run.usage),
            "error": None if run.error is None else json.loads(run.error), "created_at": iso(run.created_at),
            "started_at": iso(run.started_at), "finished_at": iso(run.finished_at)}


def as_json_file(found: list[PlaygroundRun], activations: dict[uuid.UUID, str]) -> str:
    return json.dumps([_run_object(run, activations.get(run.id)) for run in found], ensure_ascii=False, indent=2)


def as_jsonl_file(found: list[PlaygroundRun]) -> str:
    lines = []
    for run in found:
        request = json.loads(run.request)
        for choice in _choices(run):
            lines.append(_json({"run_id": str(run.id), "run_number": run.number, "status": run.status.value,
                                "model": run.model, "index": choice["index"],
                                "prompt": prompt_of(request, choice["index"]), "text": choice["text"],
                                "finish_reason": choice.get("finish_reason"), "logprobs": choice.get("logprobs"),
                                "request": request}))
    return "".join(line + "\n" for line in lines)


def _prompt_text(prompt: Any) -> str:
    return prompt if isinstance(prompt, str) else _json(prompt)


def as_text_file(found: list[PlaygroundRun]) -> str:
    blocks = []
    for run in found:
        request = json.loads(run.request)
        for choice in _choices(run):
            head = f"Run {run.number}, choice {choice['index']} ({run.model}, {run.status.value})"
            # With echo the text holds its prompt already.
            prompt = "" if request.get("echo") else _prompt_text(prompt_of(request, choice["index"]))
            blocks.append(f"{head}\n\n{prompt}{choice['text']}\n")
    return "\n".join(blocks)


async def export(services: Services, user_id: uuid.UUID, file_format: str, ids: list[uuid.UUID] | None,
                 every: bool) -> ExportFile:
    if every == (ids is not None):
        raise errors.InvalidRequest(NO_RUNS_NAMED, "ids")
    now = services.clock()
    stored: dict[uuid.UUID, str] = {}
    async with services.sessions() as session:
        if ids is None:
            found = await runs.every(session, user_id)
        else:
            found = await runs.by_ids(session, user_id, ids)
            if file_format == "json":  # chosen Runs keep their Activations while they are kept
                for run in found:
                    data = await runs.activations(session, run.id, user_id, now) if activations_kept(run, now) else None
                    if data is not None:
                        stored[run.id] = data
    if file_format == "json":
        content = as_json_file(found, stored)
    elif file_format == "jsonl":
        content = as_jsonl_file(found)
    else:
        content = as_text_file(found)
    return ExportFile(content, MEDIA_TYPES[file_format], f"runs.{FILE_ENDINGS[file_format]}")
