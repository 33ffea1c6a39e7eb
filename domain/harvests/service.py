"""Harvests: the routes' logic (POST, GET with `wait`, DELETE /v1/harvest).

A submit is checked (strict validation, the model, the Layers and the
directions, the spend stop), then against the tokens of its whole Hold, which
it does not take yet, and queued under the caps (ledger/work/harvests.py). The
Runner takes the Hold when it starts the harvest (domain/harvests/handler.py).
"""
from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from datetime import datetime
from typing import Any, Awaitable, Callable

from domain import errors
from domain.answers import Answer
from domain.completions.validation import bad_value
from domain.harvests.validation import HarvestPlan, fit_to_model, parse_harvest_request
from domain.harvests.views import PROGRESS_HEADER, Links, harvest_json, harvest_request_id, progress
from domain.services import Services
from ledger.work import harvests as rows
from ledger.store.ids import uuid7
from ledger.work.idempotency import Replay
from ledger.work.tables import ENDED, Harvest, Work, WorkKind, WorkStatus
from ledger.accounts.keys import Principal

ROUTE = "POST /v1/harvest"
NOT_FOUND = "None of your harvests has the job_id {job_id}."
NOT_CANCELLABLE = "This harvest is {status}, so it cannot be canceled. Only a pending or running harvest can."
UNSUPPORTED = "The API serves the model `{name}` but does not harvest it. The API harvests {ids}."
CAP_MESSAGES = {
    "quota": "This API key started {limit} harvests this UTC month, the most that one key may start. "
             "Submit again in the next month, from {day} (UTC).",
    "concurrency": "You have {limit} {harvests} on {size} models queued or running, your most. "
                   "Submit another when one ends, or cancel one.",
    "capacity": "All Users together have {limit} harvests on large models queued or running, the most that "
                "the API takes. Submit again when one of them ends.",
}
CAP_ERRORS = {"quota": errors.HarvestQuotaExceeded, "concurrency": errors.HarvestConcurrencyExceeded,
              "capacity": errors.HarvestCapacityExceeded}
WAIT_MAX_S = 60.0
WAIT = re.compile(r"[0-9]{1,2}(\.[0-9]{1,6})?")
POLL_S = 0.25  # how often a waiting read reads the harvest again
DECLINED = {"X-Acs-Longpoll": "declined", "Retry-After": "3"}


def parse_job_id(job_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(job_id)
    except ValueError:
        raise bad_value("job_id", "a harvest's job_id, a UUID such as 01a19d8b-2892-7afa-8b51-35c9fc2f5572") from None


def parse_wait(wait: str | None) -> float:
    if wait is None:
        return 0.0
    if not WAIT.fullmatch(wait) or float(wait) > WAIT_MAX_S:
        raise bad_value("wait", "a number of seconds from 0 to 60")
    return float(wait)


class HarvestService:
    def __init__(self, services: Services, base_url: str) -> None:
        """`base_url`: the request's, for the links of a done harvest without ACS_PUBLIC_BASE_URL."""
        self.services, self.long_polls, self.clock = services, services.long_polls, services.clock
        settings = services.settings
        self.links = Links(base_url=settings.public_base_url or base_url,
                           secret=settings.harvest_link_key,
                           ttl_s=int(settings.harvest_link_ttl_s))

    # -- POST /v1/harvest ------------------------------------------------------------------------------

    def prepare(self, body: Any) -> HarvestPlan:
        request = parse_harvest_request(body)
        model = self.services.resolve_model(request.model)
        if not model.harvest:
            ids = ", ".join(m.id for m in self.services.served_models() if m.harvest) or "no model"
            raise errors.HarvestUnsupported(UNSUPPORTED.format(name=request.model, ids=ids), "model")
        return fit_to_model(request, model)

    async def submit(self, body: Any, principal: Principal, idempotency_key: str | None) -> Answer:
        # A 50 MiB body decodes for a while: off the event loop.
        plan = await asyncio.to_thread(self.prepare, body)
        await self.services.ledger.check_spend_stop()
        async with self.services.idempotency.claimed(principal.user_id, idempotency_key, ROUTE, body) as claim:
            if isinstance(claim, Replay):
                return await self._again(claim, principal)
            work_id = uuid7()
            await self.services.ledger.check_fits(rows.hold_ask(
                principal.user_id, principal.key_id, plan.model.id, plan.reserved_tokens, harvest_request_id(work_id)))
            work, harvest = await self._enqueue(plan, principal, work_id)
        self.services.wake_runner(WorkKind.harvest)
        payload = harvest_json(work, harvest, self.clock(), self.links)
        if claim is not None:
            await self.services.idempotency.answered(claim.record_id, 202, payload)
        return Answer(payload, 202)

    async def _again(self, replay: Replay, principal: Principal) -> Answer:
        """The same key and request: the harvest it made, as it is now; nothing is queued again."""
        work, harvest = await self._find(uuid.UUID(json.loads(replay.body)["job_id"]), principal)
        return Answer(harvest_json(work, harvest, self.clock(), self.links))

    async def _enqueue(self, plan: HarvestPlan, principal: Principal, work_id: uuid.UUID) -> tuple[Work, Harvest]:
        now = self.clock()
        request = plan.request
        work = Work(id=work_id, kind=WorkKind.harvest, user_id=principal.user_id, key_id=principal.key_id,
                    model=request.model, model_id=plan.model.id, created_at=now,
                    request=json.dumps(plan.normalized(), ensure_ascii=False, separators=(",", ":")),
                    request_id=harvest_request_id(work_id))
        harvest = Harvest(work_id=work_id, model_class=plan.model.harvest_class, n_prompts=len(request.prompts),
                          reserved_tokens=plan.reserved_tokens, layers=json.dumps(plan.layers))
        async with self.services.ledger.write_sessions() as session:
            queued = await rows.enqueue(session, work, harvest, now)
        if isinstance(queued, rows.CapFull):
            raise self._cap_error(queued, now)
        return queued

    @staticmethod
    def _cap_error(full: rows.CapFull, now: datetime) -> errors.ApiError:
        _, next_month = rows.month_bounds(now)
        message = CAP_MESSAGES[full.cap].format(
            limit=full.limit, harvests="harvest" if full.limit == 1 else "harvests", size=full.model_class,
            day=next_month.date().isoformat())
        return CAP_ERRORS[full.cap](message)

    # -- GET and DELETE /v1/harvest/{job_id} ------------------------------------------------------------

    async def _find(self, work_id: uuid.UUID, principal: Principal) -> tuple[Work, Harvest]:
        async with self.services.sessions() as session:
            found = await rows.find(session, work_id, principal.user_id)
        if found is None:
            raise errors.HarvestJobNotFound(NOT_FOUND.format(job_id=work_id))
        return found

    async def get(self, job_id: str, wait: str | None, principal: Principal,
                  disconnected: Callable[[], Awaitable[bool]] | None = None) -> Answer:
        work_id, wait_s = parse_job_id(job_id), parse_wait(wait)
        work, harvest = await self._find(work_id, principal)
        headers: dict[str, str] = {}
        if wait_s > 0 and work.status not in ENDED:
            with self.long_polls.slot(principal.key_id) as may_wait:
                if may_wait:
                    work, harvest = await self._wait_for_change(work, harvest, principal, wait_s, disconnected)
                else:
                    headers.update(DECLINED)
        headers[PROGRESS_HEADER] = progress(work, harvest)
        return Answer(harvest_json(work, harvest, self.clock(), self.links), headers=headers)

    async def _wait_for_change(self, work: Work, harvest: Harvest, principal: Principal, wait_s: float,
                               disconnected: Callable[[], Awaitable[bool]] | None) -> tuple[Work, Harvest]:
        """Read the harvest again every 250 ms until its status changes or `wait_s` passed."""
        first, deadline = work.status, time.monotonic() + wait_s
        while (left := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(POLL_S, left))
            work, harvest = await self._find(work.id, principal)
            if work.status != first or (disconnected is not None and await disconnected()):
                break
        return work, harvest

    async def cancel(self, job_id: str, principal: Principal) -> dict[str, Any]:
        work_id = parse_job_id(job_id)
        async with self.services.ledger.write_sessions() as session:
            found = await rows.cancel(session, work_id, principal.user_id, self.clock())
        if found is None:
            raise errors.HarvestJobNotFound(NOT_FOUND.format(job_id=work_id))
        work, harvest = found
        if work.status in (WorkStatus.succeeded, WorkStatus.failed):
            status = "done" if work.status == WorkStatus.succeeded else "failed"
            raise errors.HarvestNotCancellable(NOT_CANCELLABLE.format(status=status))
        return harvest_json(work, harvest, self.clock(), self.links)
