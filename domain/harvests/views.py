"""A harvest as the API shows it (openapi.json's HarvestJob, additionalProperties false)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from domain.jobs.views import iso
from harvest.links import signed_urls
from ledger.work.tables import Harvest, Work, WorkStatus

STATUS = {WorkStatus.queued: "pending", WorkStatus.running: "running", WorkStatus.succeeded: "done",
          WorkStatus.failed: "failed", WorkStatus.cancelled: "cancelled"}
# What a done harvest's stored result gives HarvestResult; the links are made at each read.
RESULT_FIELDS = ("n_shards", "layer_indices", "contents", "tokens", "bytes_written", "timings")
PROGRESS_HEADER = "X-Acs-Harvest-Progress"


@dataclass(frozen=True)
class Links:
    """Where the links of a done harvest point, what signs them, and how long they work."""

    base_url: str
    secret: bytes
    ttl_s: int


def harvest_request_id(work_id: Any) -> str:
    return f"req_harvest_{work_id.hex}"


def _ended_body(work: Work) -> dict[str, Any]:
    return json.loads(work.result_body) if work.result_body else {}


def harvest_json(work: Work, harvest: Harvest, now: datetime, links: Links) -> dict[str, Any]:
    status = STATUS[work.status]
    ended = _ended_body(work) if work.status not in (WorkStatus.queued, WorkStatus.running) else None
    answer: dict[str, Any] = {
        "job_id": str(work.id),
        "run_id": str(work.id),
        "status": status,
        "model": work.model,
        "n_prompts": harvest.n_prompts,
        "reserved_tokens": harvest.reserved_tokens,
        "layers": json.loads(harvest.layers),
        # What it was charged, once it ended: a failure or a free cancel is 0.
        "tokens": None if ended is None else int(ended.get("tokens") or 0),
        "created_at": iso(work.created_at),
        "started_at": iso(harvest.gpu_started_at),
        "completed_at": iso(work.finished_at) if ended is not None else None,
    }
    if ended is None:  # pending or running: nothing ended yet
        return answer
    if status == "done":
        expires_at = int(now.timestamp()) + links.ttl_s
        stored = ended.get("result") or {}
        result = {key: stored[key] for key in RESULT_FIELDS if key in stored}
        result.update(signed_urls(links.base_url, links.secret, work.id, int(stored.get("n_shards", 0)), expires_at))
        answer["result"] = result
        answer["urls_expire_at"] = iso(datetime.fromtimestamp(expires_at, timezone.utc))
    elif status == "failed":
        answer["error"] = str(ended.get("error") or "The harvest failed.")
    return answer


def progress(work: Work, harvest: Harvest) -> str:
    """`prompts=<done>/<n>`: a done harvest has read them all."""
    done = harvest.n_prompts if work.status == WorkStatus.succeeded else min(harvest.prompts_done, harvest.n_prompts)
    return f"prompts={done}/{harvest.n_prompts}"
