"""Looms in the ledger: trees of Nodes (spec: "Grow a Loom with the API").

Reads give a Loom's live Nodes in the order of a read: the roots by their
place, then depth first, siblings in the order they were made. Every change
that checks the states of Nodes locks the Loom's row first (`lock_loom`), so
two clients that change one Loom at once are serialised, and a check and the
change it allows are one transaction.

A deleted Loom or Node is gone for its User at once (`deleted_at`) and
erased 14 days later (`erase_deleted`).
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Iterable

from sqlalchemy import delete, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.work import queue as queue
from ledger.errors import LoomConflict, LoomNotFound
from ledger.tokens.tables import Counting, UsageStatus
from ledger.work.tables import ENDED, GROWING, Loom, LoomNode, NodeStatus, Work, WorkKind, WorkStatus

MAX_NODES = 2000
NODE_NOT_FOUND = "None of the Nodes of this Loom has the id {node_id}."
LIST_SIZE = 100
TITLE_MAX = 120
TITLE_FROM_ROOT_MAX = 40
KEPT_AFTER_DELETE = timedelta(days=14)

FULL = ("This Loom has {count} Nodes and holds at most {cap}, so {fit} more fit. "
        "Delete Nodes to make room.")
FULL_NONE = "This Loom has {cap} Nodes, the most that a Loom holds, so no more fit. Delete Nodes to make room."
# How a refusal names the way to stop a Loom's growing Branch, with {loom_id} to fill: the API's
# route, unless the caller names its own (the App names its Stop button: domain/looms/wording.py).
STOP_ROUTE = "POST /v1/looms/{loom_id}/cancel"
STOP_OR_WAIT = "A Node of this Loom is queued or running. Stop the Branch with {stop}, or wait until it ends."


@dataclass
class LoomTree:
    loom: Loom
    nodes: list[LoomNode]  # live Nodes, in the order of a read, with their effective status

    def node(self, node_id: uuid.UUID) -> LoomNode:
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise LoomNotFound(NODE_NOT_FOUND.format(node_id=node_id))

    def children(self, node_id: uuid.UUID) -> list[LoomNode]:
        return [node for node in self.nodes if node.parent_id == node_id]

    def subtree(self, node_id: uuid.UUID) -> list[LoomNode]:
        """The Node and every Node under it. Each Node's children come from one pass over the
        Nodes: a scan of them all for each Node reached made a sibling under the root of a
        2,000-Node Loom take 1.2 s (bench/loom_page.py)."""
        children: dict[uuid.UUID | None, list[LoomNode]] = {}
        for node in self.nodes:
            children.setdefault(node.parent_id, []).append(node)
        below, frontier = [], [self.node(node_id)]
        while frontier:
            node = frontier.pop()
            below.append(node)
            frontier.extend(children.get(node.id, ()))
        return below

    def path(self, node_id: uuid.UUID) -> list[LoomNode]:
        """The Nodes from the root down to this one."""
        by_id = {node.id: node for node in self.nodes}
        path, node = [], by_id.get(node_id)
        while node is not None and len(path) <= len(by_id):
            path.append(node)
            node = by_id.get(node.parent_id) if node.parent_id is not None else None
        return list(reversed(path))

    def path_text(self, node_id: uuid.UUID) -> str:
        return "".join(node.text for node in self.path(node_id))

    @property
    def prompt(self) -> str:
        roots = [node for node in self.nodes if node.parent_id is None]
        return roots[0].text if roots else ""

    def growing(self, nodes: Iterable[LoomNode] | None = None) -> list[LoomNode]:
        return [node for node in (self.nodes if nodes is None else nodes) if node.status in GROWING]


def sibling_key(node: LoomNode) -> tuple:
    return (node.position, node.created_at, node.id)


def read_order(nodes: list[LoomNode]) -> list[LoomNode]:
    """Roots first by their place; each Node after its parent and before its next sibling."""
    ids = {node.id for node in nodes}
    children: dict[uuid.UUID | None, list[LoomNode]] = {}
    for node in nodes:
        parent = node.parent_id if node.parent_id in ids else None
        children.setdefault(parent, []).append(node)
    for siblings in children.values():
        siblings.sort(key=sibling_key)
    ordered: list[LoomNode] = []
    stack = list(reversed(children.get(None, [])))
    seen: set[uuid.UUID] = set()
    while stack:
        node = stack.pop()
        if node.id in seen:
            continue
        seen.add(node.id)
        ordered.append(node)
        stack.extend(reversed(children.get(node.id, [])))
    return ordered


def effective(node: LoomNode, work_status: WorkStatus | None) -> LoomNode:
    """A Node whose work row went back to `queued` (a restart) reads as queued, without text:
    it starts again from the beginning."""
    if _restarted(node, work_status):
        node.status, node.text, node.logprobs, node.used_tokens = NodeStatus.queued, "", None, 0
    return node


def title_from_root(root_text: str) -> str:
    """The first line of the root, cut to 40 characters."""
    return root_text.split("\n", 1)[0].strip()[:TITLE_FROM_ROOT_MAX]


def clean_title(title: str) -> str:
    return title.strip()[:TITLE_MAX]


def normalize_newlines(text: str) -> str:
    """A CRLF or a lone CR is stored as LF."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def check_room(tree: LoomTree, adding: int) -> None:
    """409 when `adding` Nodes would pass the cap; the message says how many more fit."""
    count = len(tree.nodes)
    if count + adding > MAX_NODES:
        fit = max(MAX_NODES - count, 0)
        message = FULL_NONE if fit == 0 else FULL
        raise LoomConflict(message.format(count=count, cap=MAX_NODES, fit=fit))


# -- reads ------------------------------------------------------------------------------------------


def _live_loom(loom_id: uuid.UUID, user_id: uuid.UUID):
    return select(Loom).where(Loom.id == loom_id, Loom.user_id == user_id, col(Loom.deleted_at).is_(None))


async def lock_loom(session: AsyncSession, loom_id: uuid.UUID, user_id: uuid.UUID) -> Loom:
    """The User's live Loom, its row locked until the transaction ends; LoomNotFound otherwise."""
    loom = (await session.exec(_live_loom(loom_id, user_id).with_for_update())).first()
    if loom is None:
        raise LoomNotFound(not_found_message(loom_id))
    return loom


def not_found_message(loom_id: uuid.UUID | str) -> str:
    return f"None of your Looms has the id {loom_id}."


async def nodes_of(session: AsyncSession, loom_id: uuid.UUID) -> list[LoomNode]:
    """The Loom's live Nodes in the order of a read, with their effective status."""
    rows = (await session.exec(
        select(LoomNode, col(Work.status)).join(Work, col(Work.id) == LoomNode.work_id, isouter=True)
        .where(LoomNode.loom_id == loom_id, col(LoomNode.deleted_at).is_(None)))).all()
    nodes = []
    for node, work_status in rows:
        if _restarted(node, work_status):
            session.expunge(node)  # the view changes, never the row
            node = effective(node, work_status)
        nodes.append(node)
    return read_order(nodes)


def _restarted(node: LoomNode, work_status: WorkStatus | None) -> bool:
    return work_status == WorkStatus.queued and node.status == NodeStatus.running


async def tree_of(session: AsyncSession, loom: Loom) -> LoomTree:
    return LoomTree(loom, await nodes_of(session, loom.id))


async def load(session: AsyncSession, loom_id: uuid.UUID, user_id: uuid.UUID, *, lock: bool = False) -> LoomTree:
    """The User's live Loom and its Nodes; LoomNotFound for another User's, a deleted or an unknown id.
    With `lock`, the Loom's row stays locked until the transaction ends."""
    if lock:
        loom = await lock_loom(session, loom_id, user_id)
    else:
        loom = (await session.exec(_live_loom(loom_id, user_id))).first()
        if loom is None:
            raise LoomNotFound(not_found_message(loom_id))
    return await tree_of(session, loom)


async def read(session: AsyncSession, loom_id: uuid.UUID, user_id: uuid.UUID) -> LoomTree:
    """A read outside a change: the transaction ends, and the rows stay readable."""
    tree = await load(session, loom_id, user_id)
    session.expunge_all()
    await session.rollback()
    return tree


async def listing(session: AsyncSession, user_id: uuid.UUID) -> list[tuple[Loom, str]]:
    """The newest 100 Looms with their prompts: pinned first, newest pin first, then by last change."""
    pinned_first = col(Loom.pinned_at).is_(None)
    looms = list((await session.exec(
        select(Loom).where(Loom.user_id == user_id, col(Loom.deleted_at).is_(None))
        .order_by(pinned_first, col(Loom.pinned_at).desc(), col(Loom.updated_at).desc(), col(Loom.id).desc())
        .limit(LIST_SIZE))).all())
    prompts: dict[uuid.UUID, str] = {}
    if looms:
        roots = (await session.exec(
            select(LoomNode).where(col(LoomNode.loom_id).in_([loom.id for loom in looms]),
                                   col(LoomNode.parent_id).is_(None), col(LoomNode.deleted_at).is_(None)))).all()
        for root in sorted(roots, key=sibling_key, reverse=True):
            prompts[root.loom_id] = root.text
    session.expunge_all()
    await session.rollback()
    return [(loom, prompts.get(loom.id, "")) for loom in looms]


# -- Looms ------------------------------------------------------------------------------------------


async def create(session: AsyncSession, user_id: uuid.UUID, prompt: str, now: datetime,
                 loom_id: uuid.UUID | None = None) -> LoomTree:
    """A new Loom whose root, `completed`, is the prompt; the title empty."""
    loom = Loom(user_id=user_id, created_at=now, updated_at=now, title="")
    if loom_id is not None:
        loom.id = loom_id
    root = LoomNode(loom_id=loom.id, parent_id=None, position=0, status=NodeStatus.completed,
                    text=normalize_newlines(prompt), created_at=now)
    session.add(loom)
    await session.flush()
    session.add(root)
    await session.commit()
    return await read(session, loom.id, user_id)


async def change(session: AsyncSession, loom_id: uuid.UUID, user_id: uuid.UUID, now: datetime, *,
                 title: str | None = None, pinned: bool | None = None) -> LoomTree:
    """Rename (trimmed, cut to 120; a rename moves it) and pin (which moves nothing)."""
    loom = await lock_loom(session, loom_id, user_id)
    if title is not None:
        loom.title = clean_title(title)
        loom.updated_at = now
    if pinned is not None and pinned != (loom.pinned_at is not None):
        loom.pinned_at = now if pinned else None
    session.add(loom)
    await session.commit()
    return await read(session, loom_id, user_id)


def growing_loom(loom_id: uuid.UUID, stop: str = STOP_ROUTE) -> str:
    """The refusal of a change while a Node of the Loom grows; `stop` as STOP_ROUTE."""
    return STOP_OR_WAIT.format(stop=stop.format(loom_id=loom_id))


async def delete_loom(session: AsyncSession, loom_id: uuid.UUID, user_id: uuid.UUID, now: datetime, *,
                      stop: str = STOP_ROUTE) -> uuid.UUID:
    tree = await load(session, loom_id, user_id, lock=True)
    if tree.growing():
        raise LoomConflict(growing_loom(loom_id, stop))
    tree.loom.deleted_at = now
    session.add(tree.loom)
    await session.commit()
    return loom_id


def touch(loom: Loom, now: datetime) -> None:
    """A change that moves the Loom to the top of its unpinned Looms."""
    loom.updated_at = now


# -- Branch -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NewNode:
    request: dict  # the NodeRequest, in the spec's shape, with its own seed


async def branch(session: AsyncSession, loom_id: uuid.UUID, parent_id: uuid.UUID, user_id: uuid.UUID,
                 key_id: uuid.UUID | None, model: str, model_id: str, new_nodes: list[NewNode],
                 generation_config: dict, now: datetime, *, stop: str = STOP_ROUTE) -> list[LoomNode]:
    """Queue the Branch's Nodes, each with its work row, under a `completed` or `cancelled` Node.
    `key_id` None: a Branch started in the App, whose Nodes no key's pause or revoke touches.
    `stop`: how a refusal names the way to stop a Branch (STOP_ROUTE)."""
    tree = await load(session, loom_id, user_id, lock=True)
    parent = tree.node(parent_id)
    if parent.status not in (NodeStatus.completed, NodeStatus.cancelled):
        raise LoomConflict(branch_refusal(parent.status, loom_id, stop))
    check_room(tree, len(new_nodes))
    if not tree.loom.title:
        tree.loom.title = title_from_root(tree.prompt)
    tree.loom.model = model
    tree.loom.last_generation_config = json.dumps(generation_config, separators=(",", ":"))
    touch(tree.loom, now)
    session.add(tree.loom)
    position = max((child.position for child in tree.children(parent_id)), default=-1) + 1
    made = []
    for i, new in enumerate(new_nodes):
        node = LoomNode(loom_id=loom_id, parent_id=parent_id, position=position + i, status=NodeStatus.queued,
                        text="", request=json.dumps(new.request, separators=(",", ":")), created_at=now)
        work = Work(kind=WorkKind.node, user_id=user_id, key_id=key_id, model=model, model_id=model_id,
                    request=json.dumps({"loom_id": str(loom_id), "node_id": str(node.id)}),
                    request_id=f"node-{node.id.hex}", created_at=now)
        node.work_id = work.id
        session.add(work)
        made.append(node)
    await session.flush()
    for node in made:
        session.add(node)
    await session.commit()
    for node in made:
        await session.refresh(node)
        session.expunge(node)
    return made


def branch_refusal(status: NodeStatus, loom_id: uuid.UUID, stop: str = STOP_ROUTE) -> str:
    """Why a Node that did not complete nor was stopped takes no Branch; `stop` as STOP_ROUTE."""
    if status == NodeStatus.failed:
        return ("This Node failed, so it takes no Branch. Grow a Branch under its parent, "
                "or delete it.")
    return (f"This Node is {status.value}, so it takes no Branch yet. Branch only under a completed "
            f"or cancelled Node: wait until it ends, or stop it with {stop.format(loom_id=loom_id)}.")


# -- Stop -------------------------------------------------------------------------------------------


async def cancel_growing(session: AsyncSession, loom_id: uuid.UUID, user_id: uuid.UUID, now: datetime,
                         kept_for: timedelta) -> LoomTree:
    """Stop each queued or running Node: it becomes `cancelled`. A running one keeps the text it
    saved and pays for its tokens so far, as a stream that you close; a queued one held nothing."""
    tree = await load(session, loom_id, user_id, lock=True)
    # In the order of their ids, as the Runner's batched writes lock them (`loom_runs.progress_all`):
    # in another order a Stop of a growing Branch deadlocked with them on PostgreSQL.
    for node in sorted(tree.growing(), key=lambda node: node.id):
        # The work row first, as `queue.finish` locks it before it writes the Node's end.
        work = None if node.work_id is None else await session.get(Work, node.work_id, with_for_update=True)
        row = await session.get(LoomNode, node.id, with_for_update=True, populate_existing=True)
        # A live Node of the locked Loom: only erase_deleted removes Node rows, and only deleted ones.
        assert row is not None, f"the live Node {node.id} has no row"
        if row.status not in GROWING:  # it ended meanwhile: its end stands
            continue
        running = row.status == NodeStatus.running and work is not None and work.status == WorkStatus.running
        row.status = NodeStatus.cancelled
        if not running:  # queued, or put back by a restart: what it grew is gone
            row.text, row.logprobs, row.used_tokens = "", None, 0
        session.add(row)
        if work is not None and work.status not in ENDED:
            paid = queue.HoldEnd(row.used_tokens, Counting.partial, UsageStatus.stopped)
            await queue.cancel(session, work.id, user_id, WorkKind.node, now, kept_for,
                               running_end=paid if running else queue.RELEASE, commit=False)
    await session.commit()
    return await read(session, loom_id, user_id)


# -- Kept data --------------------------------------------------------------------------------------


async def erase_deleted(session: AsyncSession, now: datetime) -> int:
    """Erase the Looms and Nodes deleted more than 14 days ago, and their work rows."""
    before = now - KEPT_AFTER_DELETE
    gone_looms = select(Loom.id).where(col(Loom.deleted_at) < before)
    gone_nodes = select(LoomNode.id, LoomNode.work_id).where(
        (col(LoomNode.deleted_at) < before) | col(LoomNode.loom_id).in_(gone_looms))
    rows = (await session.exec(gone_nodes)).all()
    node_ids = [node_id for node_id, _ in rows]
    work_ids = [work_id for _, work_id in rows if work_id is not None]
    if node_ids:
        await session.execute(delete(LoomNode).where(col(LoomNode.id).in_(node_ids)))
    if work_ids:
        await session.execute(delete(Work).where(col(Work.id).in_(work_ids), col(Work.kind) == WorkKind.node))
    result = await session.exec(delete(Loom).where(col(Loom.deleted_at) < before))
    await session.commit()
    return len(node_ids) + result.rowcount


async def mark_deleted(session: AsyncSession, nodes: Iterable[LoomNode], now: datetime) -> None:
    ids = [node.id for node in nodes]
    if ids:
        await session.execute(update(LoomNode).where(col(LoomNode.id).in_(ids)).values(deleted_at=now))
