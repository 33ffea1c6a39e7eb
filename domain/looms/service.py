"""The Loom routes' logic: make, read, list, rename and pin, delete, stop, and Branch.

Each change of a Loom's Nodes is told to the Loom's streams once it has committed
(`_announced`: domain/looms/news.py), so they read it at once.

A Branch is checked as a Job is when it is made: its fields as Completions
checks them, the model, the spend stop, the Node's state and the Loom's
room, and that the tokens can hold one Node's smallest request. It holds
nothing; each Node takes its own Hold when the Runner runs it
(domain/looms/handler.py).
"""
from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime, timedelta
from typing import Any, Awaitable, Callable

from domain import errors
from domain.answers import Answer, replayed
from domain.completions.service import CompletionService
from domain.completions.validation import Msg, boolean, reject_unknown_fields, text
from domain.looms import changes, files
from domain.looms.branch import Branch, parse_branch
from domain.looms.ids import parse_id
from domain.looms.news import CHANGED, loom_topic
from domain.looms.views import branch_json, deleted_json, last_branch_json, loom_json, summary_json
from domain.looms.wording import wording
from domain.services import Services
from ledger.work import looms
from ledger.store.coltypes import utcnow
from ledger.errors import LoomConflict
from ledger.work.idempotency import Replay
from ledger.tokens.tables import UsageSource
from ledger.work.tables import NodeStatus, WorkKind
from ledger.tokens.holds import HoldAsk
from ledger.accounts.keys import Principal


def _object(body: Any) -> dict:
    if not isinstance(body, dict):
        raise errors.InvalidRequest(Msg.BODY)
    return body


class LoomService:
    def __init__(self, services: Services, clock: Callable[[], datetime] = utcnow, *, in_app: bool = False) -> None:
        """`in_app`: the App's Loom routes, whose refusals name the Loom page's buttons where the
        API's name its routes (domain/looms/wording.py), and whose import marks the title."""
        self.services = services
        self.clock = clock
        self.in_app = in_app
        self.wording = wording(in_app)
        self.kept_for = timedelta(seconds=services.settings.job_result_kept_s)

    # -- Idempotency-Key on every route that writes ------------------------------------------------

    async def once(self, principal: Principal, key: str | None, route: str, body: Any,
                   change: Callable[[], Awaitable[dict]],
                   again: Callable[[Replay], Awaitable[Answer]] | None = None) -> Answer:
        """Run `change` once for a key: a retry gets the first answer again (or `again`'s)."""
        async with self.services.idempotency.claimed(principal.user_id, key, route, body) as claim:
            if isinstance(claim, Replay):
                return await again(claim) if again else replayed(claim)
            payload = await change()
        if claim is not None:
            await self.services.idempotency.answered(claim.record_id, 200, payload)
        return Answer(payload)

    async def _write(self, function: Callable, *args: Any, **kwargs: Any) -> Any:
        async with self.services.ledger.write_sessions() as session:
            return await function(session, *args, **kwargs)

    async def _announced(self, loom: uuid.UUID, payload: dict) -> dict:
        """The answer of a change that committed, once the Loom's streams were told to read it."""
        await self.services.feed.publish(loom_topic(loom), CHANGED)
        return payload

    async def _read(self, function: Callable, *args: Any) -> Any:
        async with self.services.sessions() as session:
            return await function(session, *args)

    # -- the Loom -----------------------------------------------------------------------------------

    async def create(self, body: Any, principal: Principal, key: str | None) -> Answer:
        body = _object(body)
        reject_unknown_fields(body, {"prompt"})
        if body.get("prompt") is None:
            raise errors.InvalidRequest(Msg.MISSING.format(path="prompt"), "prompt")
        prompt = text(body["prompt"], "prompt")

        async def make() -> dict:
            return loom_json(await self._write(looms.create, principal.user_id, prompt, self.clock()))

        async def as_it_is_now(replay: Replay) -> Answer:
            # The spec: a retry answers the Loom as it is now, or 404 if it was deleted since.
            return Answer(await self.get(json.loads(replay.body)["id"], principal))

        return await self.once(principal, key, "POST /v1/looms", body, make, as_it_is_now)

    async def get(self, loom_id: str, principal: Principal, *, with_last_branch: bool = False) -> dict:
        """`with_last_branch`: the App's read, which opens a Loom with its last Branch's settings
        (spec: "Branch under a Node"), adds them as `last_branch` (the export file's two fields)."""
        tree = await self._read(looms.read, parse_id(loom_id, "loom"), principal.user_id)
        answer = loom_json(tree)
        if with_last_branch:
            answer["last_branch"] = last_branch_json(tree.loom)
        return answer

    async def list(self, principal: Principal) -> dict:
        rows = await self._read(looms.listing, principal.user_id)
        return {"object": "list", "data": [summary_json(loom, prompt) for loom, prompt in rows]}

    async def change(self, loom_id: str, body: Any, principal: Principal, key: str | None) -> Answer:
        body = _object(body)
        reject_unknown_fields(body, {"title", "pinned"})
        title = None if body.get("title") is None else text(body["title"], "title")
        pinned = None if body.get("pinned") is None else boolean(body["pinned"], "pinned")
        loom = parse_id(loom_id, "loom")

        async def rename_or_pin() -> dict:
            return loom_json(await self._write(looms.change, loom, principal.user_id, self.clock(),
                                               title=title, pinned=pinned))

        return await self.once(principal, key, f"POST /v1/looms/{loom}", body, rename_or_pin)

    async def delete(self, loom_id: str, principal: Principal, key: str | None) -> Answer:
        loom = parse_id(loom_id, "loom")

        async def delete_it() -> dict:
            return await self._announced(loom, deleted_json(await self._write(
                looms.delete_loom, loom, principal.user_id, self.clock(), stop=self.wording.stop)))

        return await self.once(principal, key, f"DELETE /v1/looms/{loom}", None, delete_it)

    async def cancel(self, loom_id: str, principal: Principal, key: str | None) -> Answer:
        loom = parse_id(loom_id, "loom")

        async def stop() -> dict:
            return await self._announced(loom, loom_json(await self._write(
                looms.cancel_growing, loom, principal.user_id, self.clock(), self.kept_for)))

        return await self.once(principal, key, f"POST /v1/looms/{loom}/cancel", None, stop)

    async def export(self, loom_id: str, principal: Principal) -> dict[str, Any]:
        return await files.export(self.services, loom_id, principal)

    async def import_(self, body: Any, principal: Principal, key: str | None) -> Answer:
        """The App's import marks the title ` (imported)` (domain/looms/files.py)."""
        route = "POST /account/looms/import" if self.in_app else "POST /v1/looms/import"
        return await self.once(principal, key, route, body,
                               lambda: files.import_(self.services, body, principal, in_app=self.in_app))

    # -- Branch --------------------------------------------------------------------------------------

    async def branch(self, loom_id: str, node_id: str, body: Any, principal: Principal, key: str | None) -> Answer:
        loom, parent = parse_id(loom_id, "loom"), parse_id(node_id, "node")
        branch = parse_branch(body)
        model = self.services.resolve_model(branch.model)
        await self.services.ledger.check_spend_stop()
        tree = await self._read(looms.read, loom, principal.user_id)
        parent_node = tree.node(parent)
        # The cheap refusals first; the ledger checks the state again under the Loom's lock.
        if parent_node.status not in (NodeStatus.completed, NodeStatus.cancelled):
            raise LoomConflict(looms.branch_refusal(parent_node.status, loom, self.wording.stop))
        looms.check_room(tree, branch.n)
        prompt_tokens = await self._check_as_completions_do(branch, tree.path_text(parent))
        await self._check_one_node_fits(model, prompt_tokens, principal)

        async def grow() -> dict:
            requests = [looms.NewNode(branch.node_request(i, model.served_model_name)) for i in range(branch.n)]
            made = await self._write(looms.branch, loom, parent, principal.user_id, principal.key_id,
                                     branch.model, model.id, requests, branch.generation_config(), self.clock(),
                                     stop=self.wording.stop)
            self.services.wake_runner(WorkKind.node)
            return await self._announced(loom, branch_json(made))

        return await self.once(principal, key, f"POST /v1/looms/{loom}/nodes/{parent}/branch", body, grow)

    async def _check_as_completions_do(self, branch: Branch, path_text: str) -> int:
        """A Node's request as POST /v1/completions checks it (the size caps of the model
        too); the tokens of its prompt. A path too long for the context is no refusal
        here: the Node fails with context_length_exceeded when it runs (the spec's table)."""
        completions = CompletionService(self.services)
        try:
            planned, _ = await asyncio.to_thread(completions.prepare, branch.completion_body(path_text))
        except errors.ContextLengthExceeded:
            model = self.services.resolve_model(branch.model)
            return len(await asyncio.to_thread(self.services.tokenizers.get(model).encode, path_text))
        return len(planned.prompt_token_ids[0])

    async def _check_one_node_fits(self, model: Any, prompt_tokens: int, principal: Principal) -> None:
        """Only that the tokens can hold one Node's smallest request: its path and one token."""
        smallest = HoldAsk(user_id=principal.user_id, key_id=principal.key_id, model=model.id,
                           prompt_tokens=prompt_tokens, choices=1, max_tokens=1, may_lower=False,
                           source=UsageSource.loom)
        await self.services.ledger.check_fits(smallest)

    # -- the tree's edits (domain/looms/changes.py): the same Idempotency-Key rule around each ---------
    # Their routes name the ids as the path gives them.

    async def _changed(self, loom_id: str, change: Awaitable[dict]) -> dict:
        payload = await change  # parsed the Loom's id: it is one
        return await self._announced(parse_id(loom_id, "loom"), payload)

    async def new_root(self, loom_id: str, body: Any, principal: Principal, key: str | None) -> Answer:
        return await self.once(principal, key, f"POST /v1/looms/{loom_id}/root", body,
                               lambda: self._changed(loom_id, changes.new_root(
                                   self.services, loom_id, body, principal, self.wording)))

    async def edit(self, loom_id: str, node_id: str, body: Any, principal: Principal, key: str | None) -> Answer:
        return await self.once(principal, key, f"POST /v1/looms/{loom_id}/nodes/{node_id}", body,
                               lambda: self._changed(loom_id, changes.edit(
                                   self.services, loom_id, node_id, body, principal, self.wording)))

    async def delete_node(self, loom_id: str, node_id: str, principal: Principal, key: str | None) -> Answer:
        return await self.once(principal, key, f"DELETE /v1/looms/{loom_id}/nodes/{node_id}", None,
                               lambda: self._changed(loom_id, changes.delete_node(
                                   self.services, loom_id, node_id, principal, self.wording)))

    async def split(self, loom_id: str, node_id: str, body: Any, principal: Principal, key: str | None) -> Answer:
        return await self.once(principal, key, f"POST /v1/looms/{loom_id}/nodes/{node_id}/split", body,
                               lambda: self._changed(loom_id, changes.split(
                                   self.services, loom_id, node_id, body, principal, self.wording)))

    async def sibling(self, loom_id: str, node_id: str, body: Any, principal: Principal, key: str | None) -> Answer:
        return await self.once(principal, key, f"POST /v1/looms/{loom_id}/nodes/{node_id}/sibling", body,
                               lambda: self._changed(loom_id, changes.sibling(
                                   self.services, loom_id, node_id, body, principal, self.wording)))
