"""How the Runner runs one Job: its Completion request, as POST /v1/completions
would without a stream, with the Job's own rules (api/completions/service.JOB)."""
from __future__ import annotations

import json
import uuid
from typing import Any, Awaitable, Callable

from api import errors
from api.background.runner import Outcome
from api.completions.service import JOB, CompletionService
from api.jobs.service import FAILED, job_body
from ledger import work as queue
from ledger.keys import ACCOUNT_SUSPENDED, KEY_REVOKED, Principal
from ledger.models import Counting, UsageStatus, Work, WorkKind, WorkStatus


class HoldEndRecorder:
    """Takes a Job's Settlement in place of the ledger: the Runner writes the Hold's
    end with the result, in one transaction, so a request is charged once and
    keeps its answer."""

    def __init__(self) -> None:
        self.recorded: queue.HoldEnd | None = None

    async def end(self, _hold_id: uuid.UUID, used: int | None, counting: Counting | None,
                  status: UsageStatus) -> None:
        if self.recorded is None:
            self.recorded = queue.HoldEnd(used, counting, status)


def _as_json(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


class JobHandler:
    kind = WorkKind.job

    def __init__(self, services: Any) -> None:
        self.completions = CompletionService(services)
        self.timeout_s = services.settings.job_answer_timeout_s

    async def run(self, work: Work, attach_hold: Callable[[uuid.UUID], Awaitable[None]]) -> Outcome:
        ends = HoldEndRecorder()
        principal = Principal(user_id=work.user_id, key_id=work.key_id, key_name="")
        # Each attempt its own engine request ids: an attempt cut by a crash may still run there.
        engine_request_id = f"{work.request_id}-{work.attempts}"
        try:
            completion = await self.completions.run_in_background(
                job_body(json.loads(work.request)), engine_request_id, principal, JOB, attach_hold, ends,
                self.timeout_s)
        except errors.ApiError as error:
            # Refused or failed: the error object of POST /v1/completions, with the Job's request_id.
            result = queue.Result(WorkStatus.failed, error.status, _as_json(error.body(work.request_id)))
            return Outcome(result, ends.recorded or queue.RELEASE)
        return Outcome(queue.Result(WorkStatus.succeeded, 200, _as_json(completion)), ends.recorded or queue.RELEASE)

    def failed(self, work: Work) -> queue.Result:
        error = errors.JobFailed(FAILED)
        return queue.Result(WorkStatus.failed, error.status, _as_json(error.body(work.request_id)))

    def refused(self, unusable: queue.Unusable) -> queue.Result:
        """A revoked key's Job fails with 401 invalid_api_key; a suspended User's with
        account_suspended. Neither reached Inference or spent anything."""
        error = (errors.InvalidApiKey(KEY_REVOKED) if unusable.revoked
                 else errors.AccountSuspended(ACCOUNT_SUSPENDED))
        return queue.Result(WorkStatus.failed, error.status, _as_json(error.body(unusable.request_id)))
