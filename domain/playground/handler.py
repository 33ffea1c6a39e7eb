"""How the Runner runs one Playground Run: its request as one streamed Completion, kept whole as
it grows (spec: "Use the Playground", "Work in the background").

The work row (kind `run`) names the Run and holds no API key: the Run acts for its User alone, so
a paused or revoked key does not touch it. Each attempt starts the Run again from the beginning
(`ledger.work.runs.start`: a planned restart runs it again), and every write is conditioned on
that attempt. The Run's end is written in the transaction that ends its work row and its Hold
(`queue.Result.also`). The Hold, with the source `playground`, ends where every background
attempt's Hold ends (`ledger.work.queue.finish` → `_end_attempt_hold`), charged as a stream's is;
a stopped Run pays for what it grew, by the stop's own transaction (`ledger.work.runs.stop`).

A Run whose Runner died fails instead of running again (its queue row's `fail_on_lost_lease`):
`failed(work)` keeps the text it saved, and the released Hold makes it cost nothing.

The Run's streams hear of it on the feed (domain/playground/news.py): each piece of its text
at once, and its start and its end once the transaction that writes them has committed, so
that the stream's read finds them.
"""
from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any, Awaitable, Callable

from sqlmodel.ext.asyncio.session import AsyncSession

from domain import errors
from domain.completions.admission import background
from domain.completions.service import CompletionService, sent_tokens
from domain.feeds import Feed, publish_after_commit
from domain.playground.growing import GrowingRuns
from domain.playground.news import CHANGED, TextsSoFar, run_topic
from deployments.background.kinds import AttemptHold
from ledger.accounts.keys import ACCOUNT_SUSPENDED, Principal
from ledger.store.coltypes import utcnow
from ledger.tokens.tables import UsageSource
from ledger.work import queue, runs
from ledger.work.runs import RunEnd, RunGrowth
from ledger.work.tables import RunStatus, Work, WorkKind, WorkStatus

FAILED = ("The API stopped while this Run was running, so the Run failed. It keeps the text that it wrote "
          "before, and costs nothing. Run it again to sample it again.")
# A Run that a stop ended, or that was deleted, before it ran: the work row has no answer.
GONE = queue.Result(WorkStatus.cancelled, 200, "{}")


def _as_json(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def run_error(error: errors.ApiError, *, started: bool) -> dict[str, Any]:
    """The error object that POST /v1/completions answers for the same request (an error after the
    answer started, as its stream's error event says it), without a request id."""
    return error.body(None, in_stream=started)["error"]


def run_body(request: dict[str, Any]) -> dict[str, Any]:
    """What the Run sends: its request, as a stream (the Playground shows the text as it grows)."""
    return {**request, "stream": True}


def run_of(work: Work) -> uuid.UUID:
    """The Run that a work row of kind `run` runs."""
    return uuid.UUID(json.loads(work.request)["run_id"])


class RunHandler:
    kind = WorkKind.run

    def __init__(self, services: Any) -> None:
        self.services, self.ledger = services, services.ledger
        self.completions = CompletionService(services)
        # No line of a key; a wait for the model (up to 45 minutes for a cold one); never lowered.
        self.policy = background(UsageSource.playground, services.settings.background_answer_wait_s)
        self.kept_for = timedelta(seconds=services.settings.job_result_kept_s)
        self.feed: Feed = services.feed
        self.growing = GrowingRuns(self._write_growth, self._announce_growth)

    async def run(self, work: Work, hold: AttemptHold) -> queue.Result:
        run_id = run_of(work)
        async with self.ledger.write_sessions() as session:
            request = await runs.start(session, run_id, work.attempts, utcnow())
        if request is None:
            return GONE
        await self.feed.publish(run_topic(run_id), CHANGED)  # committed: the Run runs, with no text yet
        principal = Principal(user_id=work.user_id, key_id=None, key_name="")
        # Each attempt its own engine request ids: an attempt cut by a crash may still run there.
        engine_request_id = f"{work.request_id}-{work.attempts}"
        growing = self.growing.run(run_id, work.attempts)
        try:
            completion = await self.completions.stream_completion_in_background(
                run_body(request), engine_request_id, principal, self.policy, hold, growing.offer)
        except errors.ApiError as error:  # refused, or failed: the Completion before the failure stays
            growing.ended()
            # It pays what its stream sent, as its Hold settled: nothing before its first token,
            # though its usage counts the prompt's tokens from its admission on.
            paid = 0 if growing.assembly is None else sent_tokens(growing.assembly)
            end = RunEnd(RunStatus.failed, growing.growth(), error=run_error(error, started=paid > 0),
                         used_tokens=paid)
            return queue.Result(WorkStatus.failed, error.status, _as_json(error.body(work.request_id)),
                                also=self._ending(end))
        except BaseException:
            growing.ended()
            raise
        growing.ended()
        activations = completion.pop("activations", None)
        growth = RunGrowth(run_id, work.attempts, completion["id"], completion["choices"], completion["usage"])
        end = RunEnd(RunStatus.completed, growth, activations=activations)
        return queue.Result(WorkStatus.succeeded, 200, _as_json({"usage": completion["usage"]}),
                            also=self._ending(end))

    async def _write_growth(self, growths: list[RunGrowth]) -> None:
        async with self.ledger.write_sessions() as session:
            await runs.progress_all(session, growths)

    async def _announce_growth(self, texts: TextsSoFar) -> None:
        await self.feed.publish(run_topic(texts.run_id), texts.message())

    def _ending(self, end: RunEnd) -> Callable[[AsyncSession], Awaitable[Any]]:
        """The Run's end, written in the transaction that ends its work row (`queue.finish`):
        dropped with it when a stop or a restart took the row meanwhile. Its streams hear of it
        once that transaction has committed."""
        async def write(session: AsyncSession) -> None:
            if await runs.end_within(session, end, utcnow()):
                self._told_after_commit(session, end.growth.run_id)
        return write

    def _told_after_commit(self, session: AsyncSession, run_id: uuid.UUID) -> None:
        publish_after_commit(session, self.feed, run_topic(run_id), CHANGED)

    def failed(self, work: Work) -> queue.Result:
        """The platform failed to run the Run, or its Runner died: it fails, keeping the text it
        saved, and costs nothing (the Runner releases its Hold)."""
        error = errors.InternalError(FAILED)
        body = run_error(error, started=False)

        async def fail_run(session: AsyncSession) -> None:
            if await runs.fail_growing_within(session, work.id, body, utcnow()):
                self._told_after_commit(session, run_of(work))

        return queue.Result(WorkStatus.failed, error.status, _as_json(error.body(work.request_id)), also=fail_run)

    def refused(self, unusable: queue.Unusable) -> queue.Result:
        """A suspended User's queued Run fails with 401 account_suspended and never reaches
        Inference. (A Run has no key, so no revoke touches it.)"""
        error = errors.AccountSuspended(ACCOUNT_SUSPENDED)
        body = run_error(error, started=False)

        async def fail_run(session: AsyncSession) -> None:
            run_id = await runs.fail_queued_within(session, unusable.work_id, body, utcnow())
            if run_id is not None:
                self._told_after_commit(session, run_id)

        return queue.Result(WorkStatus.failed, error.status, _as_json(error.body(unusable.request_id)),
                            also=fail_run)

