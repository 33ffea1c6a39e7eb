"""Jobs: one Completion request that the Runner runs in the background.

A submit is admitted as POST /v1/completions admits its request (strict
validation, the model, the caps, the spend stop), then checked against the
Job caps and against the tokens of its smallest request, and queued. It
holds nothing until the Runner starts it (domain/jobs/handler.py).
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from domain import errors
from domain.answers import Answer, Rendered
from domain.completions.admission import background, hold_ask
from domain.completions.service import CompletionService
from domain.completions.validation import Msg, bad_value
from domain.jobs.views import job_json, job_request_id, result_expired, status_url
from domain.services import Services
from ledger.work import queue as queue
from ledger.store.coltypes import utcnow
from ledger.store.ids import uuid7
from ledger.work.idempotency import Replay
from ledger.tokens.tables import UsageSource
from ledger.work.tables import Work, WorkKind, WorkStatus
from ledger.accounts.keys import Principal

ROUTE = "POST /v1/completion-jobs"
# The spec's changelog: "Jobs and Looms keep 16" as the default max_tokens.
DEFAULT_MAX_TOKENS = 16


@dataclass(frozen=True)
class JobCaps:
    """The Jobs table of the spec's Limits."""

    per_key: int = 8
    per_user: int = 32
    in_all: int = 128
    kept_per_user: int = 100
    kept_in_all: int = 1000


CAPS = JobCaps()
CAP_MESSAGES = {
    "per_key": "This API key has {cap} Jobs queued or running, the most that one key may have. "
               "Submit again when one of them ends.",
    "per_user": "You have {cap} Jobs queued or running, the most that one User may have. "
                "Submit again when one of them ends.",
    "in_all": "{cap} Jobs of all Users are queued or running, the most that the API takes. "
              "Submit again in a few minutes.",
    "kept_per_user": "The API keeps the results of {cap} of your ended Jobs, the most it keeps for one User. "
                     "Submit again when one of those results expires, {days} days after its Job ended.",
    "kept_in_all": "The API keeps the results of {cap} ended Jobs of all Users, the most it keeps. "
                   "Submit again when one of those results expires.",
}
def job_policy(settings: Any) -> Any:
    """A Job's admission: no line, a wait for the model, max_tokens never lowered, source `job`."""
    return background(UsageSource.job, settings.background_answer_wait_s)


CANCELLED = "You cancelled this Job, so it has no result."
EXPIRED = "The result of this Job expired {days} days after the Job ended. The Job itself stays."
FAILED = "The API failed to run this Job or to keep its result. It does not run the Job again."
NOT_FOUND = "None of your Jobs has the id {job_id}."


def job_body(body: Any) -> Any:
    """The request a Job runs: max_tokens left out is 16, not the context's room."""
    if isinstance(body, dict) and body.get("max_tokens") is None:
        return {**body, "max_tokens": DEFAULT_MAX_TOKENS}
    return body


def full_cap(counts: queue.Counts, caps: JobCaps = CAPS) -> str | None:
    """The first cap that a new Job would pass, by the Limits table's order."""
    for name, count in (("per_key", counts.active_key), ("per_user", counts.active_user),
                        ("in_all", counts.active_all), ("kept_per_user", counts.kept_user),
                        ("kept_in_all", counts.kept_all)):
        if count >= getattr(caps, name):
            return name
    return None


def parse_job_id(job_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(job_id)
    except ValueError:
        raise bad_value("job_id", "a Job id, a UUID such as 01a19d8b-2892-7afa-8b51-35c9fc2f5572") from None


class JobService:
    def __init__(self, services: Services) -> None:
        self.services = services
        self.kept_for = timedelta(seconds=services.settings.job_result_kept_s)
        self.kept_days = round(self.kept_for.total_seconds() / 86400)

    # -- POST /v1/completion-jobs ------------------------------------------------------------------

    async def submit(self, body: Any, principal: Principal, idempotency_key: str | None) -> Answer:
        completions = CompletionService(self.services)
        planned, model = await asyncio.to_thread(completions.prepare, job_body(body))
        if body.get("model") is None:
            raise errors.InvalidRequest(Msg.MISSING.format(path="model"), "model")
        if planned.request.stream:
            raise bad_value("stream", "false")
        await self.services.ledger.check_spend_stop()
        async with self.services.idempotency.claimed(principal.user_id, idempotency_key, ROUTE, body) as claim:
            if isinstance(claim, Replay):
                return await self._again(claim, principal)
            await self._check_smallest_request(planned, model, principal)
            work = await self._enqueue(body, model.id, principal)
        self.services.wake_runner(WorkKind.job)
        payload = job_json(work, utcnow())
        if claim is not None:
            await self.services.idempotency.answered(claim.record_id, 202, payload)
        return Answer(payload, 202, {"Location": status_url(work)})

    async def _again(self, replay: Replay, principal: Principal) -> Answer:
        """The same key and request: the Job they made, as it is now, and nothing runs again."""
        work_id = uuid.UUID(json.loads(replay.body)["id"])
        return Answer(job_json(await self._find(work_id, principal), utcnow()))

    async def _check_smallest_request(self, planned: Any, model: Any, principal: Principal) -> None:
        """Only that the tokens can hold the request with one generated token per choice;
        the Job takes its real Hold when it runs."""
        smallest = dataclasses.replace(hold_ask(planned, principal, model.id, "", job_policy(self.services.settings)),
                                       max_tokens=1)
        await self.services.ledger.check_fits(smallest)

    async def _enqueue(self, body: dict, model_id: str, principal: Principal) -> Work:
        work_id = uuid7()
        work = Work(id=work_id, kind=WorkKind.job, user_id=principal.user_id, key_id=principal.key_id,
                    model=str(body["model"]), model_id=model_id, request=json.dumps(body, separators=(",", ":")),
                    request_id=job_request_id(work_id))
        async with self.services.ledger.write_sessions() as session:
            queued = await queue.enqueue_within(session, work, lambda counts: full_cap(counts) is None, utcnow())
        if isinstance(queued, queue.Counts):  # the check above refused: one cap is full
            name = full_cap(queued)
            assert name is not None, "enqueue_within refuses only when a cap is full"
            raise errors.JobCapacity(CAP_MESSAGES[name].format(cap=getattr(CAPS, name), days=self.kept_days))
        return work

    # -- GET, result, cancel ------------------------------------------------------------------------------

    async def _find(self, work_id: uuid.UUID, principal: Principal) -> Work:
        async with self.services.sessions() as session:
            work = await queue.find(session, work_id, principal.user_id, WorkKind.job)
        if work is None:
            raise errors.JobNotFound(NOT_FOUND.format(job_id=work_id))
        return work

    async def get(self, job_id: str, principal: Principal) -> dict:
        return job_json(await self._find(parse_job_id(job_id), principal), utcnow())

    async def result(self, job_id: str, principal: Principal) -> Answer:
        work, now = await self._find(parse_job_id(job_id), principal), utcnow()
        if work.status in (WorkStatus.queued, WorkStatus.running):
            return Answer(job_json(work, now), 202, {"Retry-After": "1"})
        if work.status == WorkStatus.cancelled:
            raise errors.JobCancelled(CANCELLED)
        if result_expired(work, now):
            raise errors.JobResultExpired(EXPIRED.format(days=self.kept_days))
        if work.result_body is None or work.result_status is None:  # an ended row has both, or neither
            raise errors.JobFailed(FAILED)
        # The status and the body that POST /v1/completions answered, byte for byte.
        return Answer(Rendered(work.result_body.encode()), work.result_status)

    async def cancel(self, job_id: str, principal: Principal) -> dict:
        work_id = parse_job_id(job_id)
        async with self.services.ledger.write_sessions() as session:
            work = await queue.cancel(session, work_id, principal.user_id, WorkKind.job, utcnow(), self.kept_for)
        if work is None:
            raise errors.JobNotFound(NOT_FOUND.format(job_id=work_id))
        return job_json(work, utcnow())
