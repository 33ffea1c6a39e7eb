"""How the Runner runs one Loom Node: one Completion of its path's text, as a stream,
its text written as it grows (spec: "Grow a Loom with the API").

The work row (kind `node`) names the Node; the Node's `request` holds the
Branch fields it runs with. Each attempt starts the Node again from the
beginning (`ledger.work.loom_runs.start`), and every write of the Node is
conditioned on that attempt, so a stop keeps the text it saw and a cut
attempt's late writes are dropped. The Node's end is written in the
transaction that ends its work row and its Hold (`queue.Result.also`), so a
Node ends with its charge or not at all. The Hold ends where every background
attempt's Hold ends (`ledger.work.queue.finish` → `_end_attempt_hold`): charged
for the tokens the Node used, as a stream's is; a stopped Node pays for the
text it grew, by the stop's own transaction (`ledger.work.looms.cancel_growing`).

The Loom's streams hear of the Node on the feed (domain/looms/news.py): its start and
each piece of its text at once, and its end once the transaction that writes it has
committed, so that the stream's read finds it.
"""
from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any, Awaitable, Callable

from sqlmodel.ext.asyncio.session import AsyncSession

from domain import errors
from domain.completions.admission import background
from domain.completions.service import CompletionService, Grown
from domain.feeds import Feed, publish_after_commit
from domain.looms.branch import as_branch_param
from domain.looms.growing import Growth, GrowingTexts
from domain.looms.news import CHANGED, TextSoFar, loom_topic
from deployments.background.kinds import AttemptHold
from ledger.work import loom_runs
from ledger.work import looms
from ledger.work import queue as queue
from ledger.errors import LoomNotFound
from ledger.accounts.keys import ACCOUNT_SUSPENDED, KEY_REVOKED, Principal
from ledger.tokens.tables import UsageSource
from ledger.work.tables import NodeStatus, Work, WorkKind, WorkStatus

FAILED = "The API failed to run this Node. Grow a new Branch under its parent to sample it again."
# A Node that a stop cancelled, or that was deleted, before it ran: the work row has no answer.
GONE = queue.Result(WorkStatus.cancelled, 200, "{}")


def _as_json(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def node_error(error: errors.ApiError, *, started: bool) -> dict[str, Any]:
    """What POST /v1/completions answers for the same request, without a request_id (an error
    after the answer started as its stream's error event says it); `param` a Branch field or null."""
    body = error.body(None, in_stream=started)["error"]
    return {**body, "param": as_branch_param(body["param"])}


def completion_body(work: Work, node_request: dict[str, Any], prompt: str) -> dict[str, Any]:
    """The Node's one Completion: the text of its path, with its Branch fields (unset ones left out)."""
    fields = {key: value for key, value in node_request.items() if key != "model" and value is not None}
    return {"model": work.model_id, "prompt": prompt, "stream": True, **fields}


class NodeHandler:
    kind = WorkKind.node

    def __init__(self, services: Any) -> None:
        self.services, self.ledger = services, services.ledger
        self.completions = CompletionService(services)
        self.policy = background(UsageSource.loom, services.settings.background_answer_wait_s)
        self.kept_for = timedelta(seconds=services.settings.job_result_kept_s)
        self.feed: Feed = services.feed
        self.growing = GrowingTexts(self._write_growth, self._announce_growth)

    async def run(self, work: Work, hold: AttemptHold) -> queue.Result:
        loom_id, node_id = node_of(work)
        # One transaction reads the path and starts the Node: eight Nodes start at once.
        async with self.ledger.write_sessions() as session:
            try:
                node_request, prompt = _request_and_path(await looms.load(session, loom_id, work.user_id), node_id)
            except LoomNotFound:
                return GONE
            if not await loom_runs.start(session, node_id, work.attempts):
                return GONE
        # Committed: the Node runs, with no text yet.
        await self.feed.publish(loom_topic(loom_id), TextSoFar(node_id, work.attempts, "").message())
        return await self._grow(work, loom_id, node_id, completion_body(work, node_request, prompt), hold)

    async def _grow(self, work: Work, loom_id: uuid.UUID, node_id: uuid.UUID, body: dict,
                    hold: AttemptHold) -> queue.Result:
        """Stream the Node's Completion, its text told and written as it grows; the Result ends the Node."""
        principal = Principal(user_id=work.user_id, key_id=work.key_id, key_name="")
        # Each attempt its own engine request ids: an attempt cut by a crash may still run there.
        engine_request_id = f"{work.request_id}-{work.attempts}"
        growing = self.growing.node(loom_id, node_id, work.attempts)
        try:
            grown: Grown = await self.completions.stream_in_background(
                body, engine_request_id, principal, self.policy, hold, growing.offer)
        except errors.ApiError as error:  # refused, or failed: the text before the failure stays
            growing.ended()
            started = growing.used_tokens > 0
            ending = self._ending(loom_id, node_id, work.attempts, NodeStatus.failed, growing.text,
                                  used_tokens=growing.used_tokens, error=node_error(error, started=started))
            return queue.Result(WorkStatus.failed, error.status, _as_json(error.body(work.request_id)), also=ending)
        except BaseException:
            growing.ended()
            raise
        growing.ended()
        ending = self._ending(loom_id, node_id, work.attempts, NodeStatus.completed, grown.text,
                              logprobs=grown.logprobs, used_tokens=grown.usage["total_tokens"])
        return queue.Result(WorkStatus.succeeded, 200, _as_json({"usage": grown.usage}), also=ending)

    async def _write_growth(self, growths: list[Growth]) -> None:
        async with self.ledger.write_sessions() as session:
            await loom_runs.progress_all(session, [(g.node_id, g.attempt, g.text, g.used_tokens) for g in growths])

    async def _announce_growth(self, growth: Growth) -> None:
        await self.feed.publish(loom_topic(growth.loom_id), TextSoFar(growth.node_id, growth.attempt,
                                                                      growth.text).message())

    def _ending(self, loom_id: uuid.UUID, node_id: uuid.UUID, attempt: int, status: NodeStatus, text: str, *,
                used_tokens: int, logprobs: dict | None = None,
                error: dict | None = None) -> Callable[[AsyncSession], Awaitable[Any]]:
        """The Node's end, written in the transaction that ends its work row (`queue.finish`):
        dropped with it when a stop or a restart took the row meanwhile. Its streams read it once
        that transaction committed."""
        async def end(session: AsyncSession) -> None:
            await loom_runs.end_within(session, node_id, attempt, status, text, logprobs, error, used_tokens)
            publish_after_commit(session, self.feed, loom_topic(loom_id), CHANGED)
        return end

    def failed(self, work: Work) -> queue.Result:
        """The platform failed to run the Node: it fails, keeping the text it saved, and costs nothing."""
        error = errors.InternalError(FAILED)
        node = node_error(error, started=False)

        async def fail_node(session: AsyncSession) -> None:
            await loom_runs.fail_growing_node_within(session, work.id, node)
            publish_after_commit(session, self.feed, loom_topic(node_of(work)[0]), CHANGED)

        return queue.Result(WorkStatus.failed, error.status, _as_json(error.body(work.request_id)), also=fail_node)

    def refused(self, unusable: queue.Unusable) -> queue.Result:
        """A revoked key's or a suspended User's queued Node fails with 401 invalid_api_key and
        never reaches Inference (spec: "Read a failed Node")."""
        error = errors.InvalidApiKey(KEY_REVOKED if unusable.revoked else ACCOUNT_SUSPENDED)
        node = node_error(error, started=False)

        async def fail_node(session: AsyncSession) -> None:
            if await loom_runs.fail_queued_node_within(session, unusable.work_id, node):
                publish_after_commit(session, self.feed, loom_topic(await _loom_of(session, unusable.work_id)),
                                     CHANGED)

        return queue.Result(WorkStatus.failed, error.status, _as_json(error.body(unusable.request_id)),
                            also=fail_node)


def _request_and_path(tree: looms.LoomTree, node_id: uuid.UUID) -> tuple[dict, str]:
    """The Node's Branch fields and the text of the path from the root to its parent."""
    node = tree.node(node_id)
    prompt = "" if node.parent_id is None else tree.path_text(node.parent_id)
    return json.loads(node.request or "{}"), prompt


def node_of(work: Work) -> tuple[uuid.UUID, uuid.UUID]:
    """The Loom and the Node that a work row of kind `node` runs."""
    names = json.loads(work.request)
    return uuid.UUID(names["loom_id"]), uuid.UUID(names["node_id"])


async def _loom_of(session: AsyncSession, work_id: uuid.UUID) -> uuid.UUID:
    """The Loom of a work row of kind `node`, read in the transaction that ends it."""
    work = await session.get(Work, work_id)
    assert work is not None, f"the work row {work_id} that this transaction ends is gone"
    return node_of(work)[0]
