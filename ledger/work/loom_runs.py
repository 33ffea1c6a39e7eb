"""The writes of a running Loom Node: its start, its text as it grows, its end.

Each is one conditional UPDATE: the row changes only while the Node is live,
`running` and written by this attempt. So a Node that a stop cancelled keeps
the text it had saved, and the late writes of an attempt that a restart or a
lost lease cut are dropped: the next attempt starts the Node again with its
own number (`work.attempts`). On PostgreSQL an UPDATE that waits for a lock
(a stop's `FOR UPDATE`) checks its condition again on the new row.

The start and the text's growth commit at once; a Node's end joins the
transaction that ends its work row (`queue.Result.also`), so the Node ends
with its work row's answer and its Hold, or not at all.
"""
from __future__ import annotations

import uuid

from sqlalchemy import update
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.work.attempt_writes import as_json, changed_one
from ledger.work.tables import GROWING, LoomNode, NodeStatus


def _this_attempt(node_id: uuid.UUID, attempt: int):
    return (col(LoomNode.id) == node_id, col(LoomNode.status) == NodeStatus.running,
            col(LoomNode.attempt) == attempt, col(LoomNode.deleted_at).is_(None))


async def start(session: AsyncSession, node_id: uuid.UUID, attempt: int) -> bool:
    """The Node runs from the beginning under `attempt`: no text yet. False when it no longer
    grows (a stop cancelled it, it was deleted), or a later attempt already started it."""
    return await changed_one(session, update(LoomNode).where(
        col(LoomNode.id) == node_id, col(LoomNode.status).in_(GROWING), col(LoomNode.attempt) <= attempt,
        col(LoomNode.deleted_at).is_(None),
    ).values(status=NodeStatus.running, text="", logprobs=None, error=None, used_tokens=0, attempt=attempt),
        commit=True)


async def progress(session: AsyncSession, node_id: uuid.UUID, attempt: int, text: str, used_tokens: int) -> bool:
    """The text so far and the tokens it used (prompt and generated), written together:
    a stop pays for exactly the text that it keeps."""
    return await changed_one(session, update(LoomNode).where(*_this_attempt(node_id, attempt))
                          .values(text=text, used_tokens=used_tokens), commit=True)


async def progress_all(session: AsyncSession, growths: list[tuple[uuid.UUID, int, str, int]]) -> int:
    """The texts so far of several Nodes (node id, attempt, text, tokens), in one transaction:
    the Nodes that grow in one process are written together. The number written."""
    written = 0
    # In the order of their ids, as a Stop locks them (`looms.cancel_growing`): a Stop and these
    # writes never each hold a Node that the other waits for.
    for node_id, attempt, text, used_tokens in sorted(growths, key=lambda growth: growth[0]):
        written += await changed_one(session, update(LoomNode).where(*_this_attempt(node_id, attempt))
                                  .values(text=text, used_tokens=used_tokens), commit=False)
    await session.commit()
    return written


async def end_within(session: AsyncSession, node_id: uuid.UUID, attempt: int, status: NodeStatus,
                     text: str, logprobs: dict | None, error: dict | None, used_tokens: int) -> bool:
    """The Node's last state: `completed` (with its log probabilities when asked) or `failed`
    (with the error object, and the text before the failure)."""
    return await changed_one(session, update(LoomNode).where(*_this_attempt(node_id, attempt)).values(
        status=status, text=text, logprobs=as_json(logprobs), error=as_json(error), used_tokens=used_tokens),
        commit=False)


async def fail_queued_node_within(session: AsyncSession, work_id: uuid.UUID, error: dict) -> bool:
    """The Node of a queued work row that never runs (its key was revoked, its User suspended):
    `failed`, without text, with the error object. A Node still `running` here was cut by a
    restart and reads as queued: it fails the same way."""
    return await changed_one(session, update(LoomNode).where(
        col(LoomNode.work_id) == work_id, col(LoomNode.status).in_(GROWING), col(LoomNode.deleted_at).is_(None),
    ).values(status=NodeStatus.failed, text="", logprobs=None, error=as_json(error), used_tokens=0),
        commit=False)


async def fail_growing_node_within(session: AsyncSession, work_id: uuid.UUID, error: dict) -> bool:
    """The Node of a work row that the platform failed to run: `failed`, keeping the text it
    saved. Called only while the row is still the failed attempt's (`queue.finish`), so no
    attempt number is needed: it holds also when the attempt failed before it started the Node."""
    return await changed_one(session, update(LoomNode).where(
        col(LoomNode.work_id) == work_id, col(LoomNode.status).in_(GROWING), col(LoomNode.deleted_at).is_(None),
    ).values(status=NodeStatus.failed, logprobs=None, error=as_json(error)), commit=False)
