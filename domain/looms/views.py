"""The Loom routes' answers: the Loom, Node, LoomSummary and Branch schemas of the spec."""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from ledger.work.looms import LoomTree
from ledger.work.tables import Loom, LoomNode


def unix(moment: datetime) -> int:
    return int(moment.timestamp())


def _json_or_none(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def node_json(node: LoomNode) -> dict[str, Any]:
    return {
        "id": str(node.id),
        "object": "loom.node",
        "parent_id": None if node.parent_id is None else str(node.parent_id),
        "status": node.status.value,
        "text": node.text,
        "logprobs": _json_or_none(node.logprobs),
        "error": _json_or_none(node.error),
        "request": _json_or_none(node.request),
    }


def loom_json(tree: LoomTree) -> dict[str, Any]:
    loom = tree.loom
    return {
        "id": str(loom.id),
        "object": "loom",
        "created_at": unix(loom.created_at),
        "title": loom.title,
        "pinned": loom.pinned_at is not None,
        "nodes": [node_json(node) for node in tree.nodes],
    }


def last_branch_json(loom: Loom) -> dict[str, Any]:
    """The model and settings of the Loom's last Branch, as its export file keeps them
    (`loom.model`, `loom.last_generation_config`); None before the first Branch."""
    return {"model": loom.model, "last_generation_config": _json_or_none(loom.last_generation_config)}


def summary_json(loom: Loom, prompt: str) -> dict[str, Any]:
    return {
        "id": str(loom.id),
        "object": "loom",
        "created_at": unix(loom.created_at),
        "updated_at": unix(loom.updated_at),
        "title": loom.title,
        "pinned": loom.pinned_at is not None,
        "prompt": prompt,
    }


def branch_json(nodes: list[LoomNode]) -> dict[str, Any]:
    return {"object": "list", "data": [node_json(node) for node in nodes]}


def deleted_json(loom_id: Any) -> dict[str, Any]:
    return {"id": str(loom_id), "object": "loom", "deleted": True}
