"""How the Runner runs one Job: its Completion request, as POST /v1/completions
would without a stream, with the Job's own admission (`job_policy`)."""
from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from domain import errors
from domain.completions.service import CompletionService
from domain.jobs.service import FAILED, job_body, job_policy
from deployments.background.kinds import AttemptHold
from ledger.work import queue as queue
from ledger.accounts.keys import ACCOUNT_SUSPENDED, KEY_REVOKED, Principal
from ledger.work.tables import Work, WorkKind, WorkStatus


def _as_json(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _failed(error: errors.ApiError, request_id: str) -> queue.Result:
    """The error object POST /v1/completions would answer, with the Job's request_id."""
    return queue.Result(WorkStatus.failed, error.status, _as_json(error.body(request_id)))


class JobHandler:
    kind = WorkKind.job

    def __init__(self, services: Any) -> None:
        self.completions = CompletionService(services)
        self.policy = job_policy(services.settings)
        self.kept_for = timedelta(seconds=services.settings.job_result_kept_s)

    async def run(self, work: Work, hold: AttemptHold) -> queue.Result:
        principal = Principal(user_id=work.user_id, key_id=work.key_id, key_name="")
        # Each attempt its own engine request ids: an attempt cut by a crash may still run there.
        engine_request_id = f"{work.request_id}-{work.attempts}"
        try:
            completion = await self.completions.run_in_background(
                job_body(json.loads(work.request)), engine_request_id, principal, self.policy, hold)
        except errors.ApiError as error:  # refused or failed
            return _failed(error, work.request_id)
        return queue.Result(WorkStatus.succeeded, 200, _as_json(completion))

    def failed(self, work: Work) -> queue.Result:
        return _failed(errors.JobFailed(FAILED), work.request_id)

    def refused(self, unusable: queue.Unusable) -> queue.Result:
        """A revoked key's Job fails with 401 invalid_api_key; a suspended User's with
        account_suspended. Neither reached Inference or spent anything."""
        error = (errors.InvalidApiKey(KEY_REVOKED) if unusable.revoked
                 else errors.AccountSuspended(ACCOUNT_SUSPENDED))
        return _failed(error, unusable.request_id)
