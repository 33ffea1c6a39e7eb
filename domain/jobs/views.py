"""A Job as the API shows it (openapi.json's CompletionJob)."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ledger.work.tables import Work, WorkStatus

JOBS_PATH = "/v1/completion-jobs"


def iso(moment: datetime | None) -> str | None:
    """ISO 8601 in UTC with milliseconds, as `2026-11-02T18:35:05.226+00:00`."""
    return None if moment is None else moment.astimezone(timezone.utc).isoformat(timespec="milliseconds")


def status_url(work: Work) -> str:
    return f"{JOBS_PATH}/{work.id}"


def result_expired(work: Work, now: datetime) -> bool:
    return work.result_expires_at is not None and now >= work.result_expires_at


def job_json(work: Work, now: datetime) -> dict[str, Any]:
    return {
        "id": str(work.id),
        "request_id": work.request_id,
        "model": work.model,
        "status": work.status.value,
        "cancel_requested": work.cancel_requested,
        "created_at": iso(work.created_at),
        "started_at": iso(work.started_at),
        "finished_at": iso(work.finished_at),
        "expires_at": iso(work.result_expires_at),
        "result_expired": result_expired(work, now),
        "status_url": status_url(work),
        "result_url": f"{status_url(work)}/result",
        # Holds tokens of the Budget while it runs.
        "usage_pending": work.status == WorkStatus.running,
    }


def job_request_id(work_id: Any) -> str:
    return f"req_job_{work_id.hex}"
