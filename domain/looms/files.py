"""Export and import a Loom as a file of the old platform's shape, version 2
(spec: "Export and import a Loom"; openapi's LoomFile, LoomFileNode, LoomFileToken).

An export writes each Node parents first, in the order of a read, with its place among
its siblings, its log probabilities as one entry per token, and `generation_config`:
the Branch fields it ran with and the marks `text_modified`, `context_modified`,
`slice_offset` and `slice_end` (each only when it is set). An import reads the file
strictly (every field of the schemas; an unknown one gets 400) and by the guide's
rules; export, import and export again give the same file, ids aside.

Where the guide is silent, we decided:
- A Node that is still queued or running is exported as `cancelled` with its text so
  far: the file has no state that grows, and an import cannot run it.
- An imported text is kept as the file has it (no CRLF rewrite), so that its log
  probabilities still line up with it.
- A Node's `request` keeps the Branch fields of `generation_config` in NodeRequest's
  order, `model` and `seed` from the Node's own fields when the config does not say;
  without a model, or with a field that does not read as NodeRequest says (a wrong type,
  or outside the schema's own bounds), it has none. A field sent as null is left out,
  except `seed`, `logprobs` and `stop`, whose null is a value.
- A file without Nodes gets 400: a Loom has a root.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from domain import errors
from domain.completions.validation import (
    Msg, bad_type, bad_value, integer, number, reject_unknown, reject_unknown_fields, required, text,
)
from domain.looms.branch import SAMPLING_DEFAULTS
from domain.looms.ids import parse_id
from domain.looms.views import last_branch_json, loom_json
from domain.services import Services
from ledger.work import loom_changes
from ledger.work import looms
from ledger.store.coltypes import utcnow
from ledger.work.looms import LoomTree
from ledger.work.tables import GROWING, LoomNode, NodeStatus
from ledger.accounts.keys import Principal

VERSION = 2
NODE_ORDER = "parents_first"  # each Node after its parent and before its next sibling
IMPORTED_TITLE = "Imported loom"
# The App's import names the Loom after the file's title with this after it, so that Your Looms tells
# it from the Loom it came from (spec: "Export and import"); POST /v1/looms/import keeps the title.
APP_IMPORT_MARK = " (imported)"
NODE_REQUEST_FIELDS = ("model", *SAMPLING_DEFAULTS)
MARKS = ("text_modified", "context_modified", "slice_offset", "slice_end")
FILE_STATUSES = (NodeStatus.completed.value, NodeStatus.cancelled.value, NodeStatus.failed.value)
POSITION_MAX = 2**31 - 1

TOO_MANY = "A Loom holds at most {cap} Nodes, and the file has {count}. Split it into several files."
REPEATED_ID = "Two Nodes of the file have the id '{id}'. Give each Node its own id."
NO_NODES = "Invalid value for 'nodes': expected at least one Node, the root."

FILE_KEYS = ("version", "node_order", "loom", "nodes")
LOOM_KEYS = ("title", "model", "last_generation_config")
# The old platform's fields that the API does not keep.
NOT_KEPT = ("generation_id", "choice_index", "created_at", "finish_reason", "stop_reason", "n_tokens",
            "usage_source", "api_key_id")
NODE_KEYS = ("id", "parent_id", "text", "status", "position", "model", "seed", "generation_config", "logprobs",
             "error", *NOT_KEPT)


# -- export ------------------------------------------------------------------------------------------


def export_file(tree: LoomTree) -> dict[str, Any]:
    """The Loom as a LoomFile: its title, its last Branch's settings, and each Node parents first."""
    loom = tree.loom
    places: dict[Any, int] = {}
    nodes = []
    for node in tree.nodes:  # the order of a read: parents first, siblings in their order
        position = places.get(node.parent_id, 0)
        places[node.parent_id] = position + 1
        nodes.append(_file_node(node, position))
    return {"version": VERSION, "node_order": NODE_ORDER,
            "loom": {"title": loom.title, **last_branch_json(loom)}, "nodes": nodes}


def _file_node(node: LoomNode, position: int) -> dict[str, Any]:
    status = NodeStatus.cancelled if node.status in GROWING else node.status
    return {
        "id": str(node.id),
        "parent_id": None if node.parent_id is None else str(node.parent_id),
        "text": node.text,
        "status": status.value,
        "position": position,
        "generation_config": _generation_config(node),
        "logprobs": _file_logprobs(node.logprobs),
        "error": None if node.error is None else json.loads(node.error),
    }


def _generation_config(node: LoomNode) -> dict[str, Any] | None:
    config = {} if node.request is None else json.loads(node.request)
    # A mark goes in when it is set: true, or a range's end (0 too, a place).
    config.update({mark: getattr(node, mark) for mark in MARKS
                   if getattr(node, mark) is True or type(getattr(node, mark)) is int})
    return config or None


def _file_logprobs(logprobs: str | None) -> list[dict[str, Any]] | None:
    if logprobs is None:
        return None
    parsed = json.loads(logprobs)
    return [{"token": token, "logprob": logprob,
             "top": None if top is None else [{"token": t, "logprob": p} for t, p in top.items()]}
            for token, logprob, top in zip(parsed["tokens"], parsed["token_logprobs"], parsed["top_logprobs"])]


# -- import: read the file ---------------------------------------------------------------------------


@dataclass
class FileNode:
    """One Node as the file has it, its fields checked."""

    id: str
    parent_id: str | None
    text: str
    status: NodeStatus
    position: int | None
    request: dict | None
    marks: dict[str, Any]
    logprobs: dict | None
    error: dict | None


def _object(value: Any, path: str) -> dict:
    if not isinstance(value, dict):
        raise bad_type(path, "an object")
    return value


def _optional(fields: dict, key: str, path: str, parse: Any, *args: Any, **kwargs: Any) -> Any:
    value = fields.get(key)
    return None if value is None else parse(value, f"{path}.{key}", *args, **kwargs)


def read_file(body: Any, *, in_app: bool = False) -> tuple[str, list[FileNode]]:
    """The file's title (`in_app`: as the App names the import) and Nodes, every field as the
    schemas say; 400 invalid_request otherwise."""
    if not isinstance(body, dict):
        raise errors.InvalidRequest(Msg.BODY)
    reject_unknown_fields(body, FILE_KEYS)
    title = _title(body.get("loom"), in_app)
    nodes = body.get("nodes")
    if nodes is None:
        raise errors.InvalidRequest(Msg.MISSING.format(path="nodes"), "nodes")
    if not isinstance(nodes, list):
        raise bad_type("nodes", "a list of objects")
    if len(nodes) > looms.MAX_NODES:
        raise errors.InvalidRequest(TOO_MANY.format(cap=looms.MAX_NODES, count=len(nodes)), "nodes")
    if not nodes:
        raise errors.InvalidRequest(NO_NODES, "nodes")
    read, seen = [], set()
    for i, value in enumerate(nodes):
        node = _file_node_of(_object(value, f"nodes[{i}]"), f"nodes[{i}]")
        if node.id in seen:
            raise errors.InvalidRequest(REPEATED_ID.format(id=node.id), "nodes")
        seen.add(node.id)
        read.append(node)
    return title, read


def _title(loom: Any, in_app: bool) -> str:
    """Trimmed and cut to 120 characters; none, or an empty one, is `Imported loom`, which says
    it already. The App's: the title cut so that ` (imported)` fits after it."""
    if loom is None:
        return IMPORTED_TITLE
    reject_unknown(_object(loom, "loom"), LOOM_KEYS, "loom")
    title = looms.clean_title(_optional(loom, "title", "loom", text, "a string or null") or "")
    if not title:
        return IMPORTED_TITLE
    return title[:looms.TITLE_MAX - len(APP_IMPORT_MARK)].rstrip() + APP_IMPORT_MARK if in_app else title


def _file_node_of(fields: dict, path: str) -> FileNode:
    reject_unknown(fields, NODE_KEYS, path)
    node_id = text(required(fields, "id", path), f"{path}.id")
    if not node_id:
        raise bad_value(f"{path}.id", "a non-empty string")
    status = _optional(fields, "status", path, _status) or NodeStatus.completed
    config = _optional(fields, "generation_config", path, _config)
    model = _optional(fields, "model", path, text, "a string or null")
    seed = _optional(fields, "seed", path, integer, "a number or null", ge=0)
    error = _error_object(fields.get("error")) if status == NodeStatus.failed else None
    return FileNode(
        id=node_id,
        parent_id=_optional(fields, "parent_id", path, text, "a string or null"),
        text=_optional(fields, "text", path, text) or "",
        status=status,
        position=_optional(fields, "position", path, integer, "a number or null", ge=0, le=POSITION_MAX),
        request=node_request(config or {}, model, seed),
        marks=marks_of(config or {}),
        logprobs=_optional(fields, "logprobs", path, _logprobs),
        error=error,
    )


def _status(value: Any, path: str) -> NodeStatus:
    if not isinstance(value, str):
        raise bad_type(path, "a string or null")
    if value not in FILE_STATUSES:
        raise bad_value(path, "'completed', 'cancelled', 'failed', or null")
    return NodeStatus(value)


def _config(value: Any, path: str) -> dict:
    if not isinstance(value, dict):
        raise bad_type(path, "an object or null")
    return value


def _string(value: Any, path: str) -> str:
    # A token's text may hold any character: it is stored as JSON, which escapes each one.
    if not isinstance(value, str):
        raise bad_type(path, "a string")
    return value


def _logprobs(value: Any, path: str) -> dict:
    """The file's tokens as the Node's Logprobs; each token's offset counted within the Node."""
    if not isinstance(value, list):
        raise bad_type(path, "a list of objects or null")
    offsets, token_logprobs, tokens, tops, offset = [], [], [], [], 0
    for i, entry in enumerate(value):
        entry_path = f"{path}[{i}]"
        fields = _object(entry, entry_path)
        reject_unknown(fields, ("token", "logprob", "top"), entry_path)
        token = _string(required(fields, "token", entry_path), f"{entry_path}.token")
        if "logprob" not in fields:  # required, and null is a value (a token with no log probability)
            raise errors.InvalidRequest(Msg.MISSING.format(path=f"{entry_path}.logprob"), "nodes")
        offsets.append(offset)
        token_logprobs.append(_optional(fields, "logprob", entry_path, number, "a number or null"))
        tokens.append(token)
        tops.append(_optional(fields, "top", entry_path, _top))
        offset += len(token)
    return {"text_offset": offsets, "token_logprobs": token_logprobs, "tokens": tokens, "top_logprobs": tops}


def _top(value: Any, path: str) -> dict[str, float]:
    if not isinstance(value, list):
        raise bad_type(path, "a list of objects or null")
    top: dict[str, float] = {}
    for i, entry in enumerate(value):
        entry_path = f"{path}[{i}]"
        fields = _object(entry, entry_path)
        reject_unknown(fields, ("token", "logprob"), entry_path)
        token = _string(required(fields, "token", entry_path), f"{entry_path}.token")
        top[token] = number(required(fields, "logprob", entry_path), f"{entry_path}.logprob")
    return top


# -- import: a Node's request, marks and error -------------------------------------------------------


def _whole(value: Any, low: int | None = None, high: int | None = None) -> int | None:
    """An integer (a whole float is one, as JSON clients do not tell them apart) within bounds."""
    if type(value) is float and math.isfinite(value) and value.is_integer():
        value = int(value)
    if type(value) is not int or (low is not None and value < low) or (high is not None and value > high):
        return None
    return value


def _finite(value: Any) -> float | int | None:
    return value if type(value) in (int, float) and math.isfinite(value) else None


def _clean(value: Any) -> str | None:
    return value if isinstance(value, str) and "\x00" not in value else None


def _stop(value: Any) -> Any:
    if value is None or _clean(value) is not None:
        return value
    if isinstance(value, list) and len(value) <= 4 and all(_clean(s) is not None for s in value):
        return value
    return None


# How each NodeRequest field reads (openapi's NodeRequest: its types, and its own bounds).
_REQUEST_FIELDS = {
    "model": _clean,
    "max_tokens": lambda v: _whole(v, high=32000),
    "temperature": _finite,
    "logprobs": lambda v: v if v is None else _whole(v, 0, 100),
    "top_p": _finite,
    "top_k": _whole,
    "min_p": _finite,
    "presence_penalty": _finite,
    "frequency_penalty": _finite,
    "repetition_penalty": _finite,
    "seed": lambda v: v if v is None else _whole(v, 0),
    "stop": _stop,
}
NULLABLE = ("seed", "logprobs", "stop")


def node_request(config: dict, model: str | None, seed: int | None) -> dict | None:
    """The Branch fields of a Node's generation_config as its request, or None when they no
    longer read as Branch fields."""
    fields = {key: config[key] for key in NODE_REQUEST_FIELDS
              if key in config and (config[key] is not None or key in NULLABLE)}
    if fields.get("model") is None and model is not None:
        fields["model"] = model
    if "seed" not in fields and seed is not None:
        fields["seed"] = seed
    if fields.get("model") is None:
        return None
    request = {}
    for key, value in fields.items():
        read = _REQUEST_FIELDS[key](value)
        if read is None and value is not None:
            return None
        request[key] = read
    return request


def marks_of(config: dict) -> dict[str, Any]:
    """The old platform's marks; one of another type is left out."""
    return {
        "text_modified": config.get("text_modified") is True,
        "context_modified": config.get("context_modified") is True,
        "slice_offset": _whole(config.get("slice_offset"), 0, POSITION_MAX),
        "slice_end": _whole(config.get("slice_end"), 0, POSITION_MAX),
    }


_ERROR_FIELDS = {"message": str, "type": str, "param": (str, type(None)), "code": (str, type(None))}
_ERROR_EXTRAS = {"retryable": bool, "retry_after_seconds": int, "upstream_status": int}


def _error_object(value: Any) -> dict | None:
    """A failed Node's error as the Node shows it (the ErrorObject, without request_id); one that
    does not read as an error object is left out."""
    if not isinstance(value, dict):
        return None
    if any(key not in value or not isinstance(value[key], kind) for key, kind in _ERROR_FIELDS.items()):
        return None
    error = {key: value[key] for key in _ERROR_FIELDS}
    error.update({key: value[key] for key, kind in _ERROR_EXTRAS.items()
                  if type(value.get(key)) is kind})
    return error


# -- import: the tree --------------------------------------------------------------------------------


def parents_of(nodes: list[FileNode]) -> list[int | None]:
    """Each Node's parent, as an index into `nodes`, by the guide's rules.

    A Node whose parent is not in the file goes under the file's root when it has one
    root, else it becomes a root. A cycle becomes a tree at the Node of the cycle that
    comes first in the file: that Node becomes a root.
    """
    index = {node.id: i for i, node in enumerate(nodes)}
    roots = [i for i, node in enumerate(nodes) if node.parent_id is None]
    orphan_parent = roots[0] if len(roots) == 1 else None
    parents = [None if node.parent_id is None else index.get(node.parent_id, orphan_parent) for node in nodes]
    settled: set[int] = set()  # Nodes whose parents lead to a root
    for start in range(len(nodes)):
        walk, on_walk, at = [], set(), start
        while at is not None and at not in settled and at not in on_walk:
            walk.append(at)
            on_walk.add(at)
            at = parents[at]
        if at is not None and at in on_walk:  # back to a Node of this walk: a cycle
            cycle = walk[walk.index(at):]
            parents[min(cycle)] = None
        settled.update(walk)
    return parents


def positions_of(nodes: list[FileNode], parents: list[int | None]) -> list[int]:
    """Each Node's place among its siblings: by `position`, else its place in the file."""
    siblings: dict[int | None, list[int]] = {}
    for i, parent in enumerate(parents):
        siblings.setdefault(parent, []).append(i)
    places = [0] * len(nodes)
    for group in siblings.values():
        keyed = sorted(enumerate(group), key=lambda item: (
            item[0] if nodes[item[1]].position is None else nodes[item[1]].position, item[1]))
        for place, (_, i) in enumerate(keyed):
            places[i] = place
    return places


def import_file(body: Any, *, in_app: bool = False) -> tuple[str, list[LoomNode]]:
    """The title and the new Loom's Nodes (new ids, not yet in a Loom) that the file makes."""
    title, nodes = read_file(body, in_app=in_app)
    parents = parents_of(nodes)
    places = positions_of(nodes, parents)
    rows = [LoomNode(parent_id=None, position=places[i], status=node.status, text=node.text,
                     logprobs=_dumps(node.logprobs), error=_dumps(node.error), request=_dumps(node.request),
                     **node.marks)
            for i, node in enumerate(nodes)]
    for row, parent in zip(rows, parents):
        row.parent_id = None if parent is None else rows[parent].id
    return title, rows


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"))


# -- the routes --------------------------------------------------------------------------------------


async def export(services: Services, loom_id: str, principal: Principal) -> dict[str, Any]:
    loom = parse_id(loom_id, "loom")
    async with services.sessions() as session:
        return export_file(await looms.read(session, loom, principal.user_id))


async def import_(services: Services, body: Any, principal: Principal, *, in_app: bool = False) -> dict[str, Any]:
    title, nodes = import_file(body, in_app=in_app)
    async with services.ledger.write_sessions() as session:
        return loom_json(await loom_changes.insert_imported(session, principal.user_id, title, nodes, utcnow()))
