"""Changes of a Loom's tree that you write yourself (spec: "Change the tree", "Delete a Node").

Each change locks the Loom's row, checks the states of the Nodes that it
touches, changes them, moves the Loom to the top of its list (`touch`) and
commits, all in one transaction: a Branch or a Node's run that writes at the
same time waits for the lock, so no check goes stale before its change. Each
answers the Loom after the change. An import makes a new Loom of rows that
`domain.looms.files` read from a file.
"""
from __future__ import annotations

import json
import uuid
from datetime import datetime

from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.errors import LoomConflict
from ledger.work.looms import (
    STOP_ROUTE, LoomTree, check_room, growing_loom, load, mark_deleted, read, touch,
)
from ledger.work.tables import GROWING, Loom, LoomNode, NodeStatus

# The API's routes that a refusal names as the way past it, with {loom_id} to fill, as STOP_ROUTE;
# a caller may name its own (the App names the Loom page's buttons: domain/looms/wording.py).
NEW_ROOT_ROUTE = "POST /v1/looms/{loom_id}/root"
DELETE_LOOM_ROUTE = "DELETE /v1/looms/{loom_id}"

CANCEL_OR_WAIT = "Stop the Branch with {stop}, or wait until it ends."
FAILED = ("This Node failed, so its text is what came before the failure: it takes no edit or split. "
          "Grow a Branch under its parent, or delete it.")
NODE_GROWING = "This Node is {status}. " + CANCEL_OR_WAIT
GROWING_BELOW = "A Node under this Node is queued or running. " + CANCEL_OR_WAIT
GROWING_BESIDE = "A Node under this Node's parent is queued or running. " + CANCEL_OR_WAIT
ROOT_SIBLING = ("A root has no sibling. Write a sibling of a Node under the root, or replace the tree "
                "with {new_root}.")
ROOT_DELETE = "This Node is a root of the Loom. Delete the Loom instead, with {delete_loom}."
DELETE_GROWING = ("A Node to delete is queued or running. Delete it when its Branch ends, or stop the Branch "
                  "with {stop}.")


# -- checks ------------------------------------------------------------------------------------------


def _refuse_growing(tree: LoomTree, node: LoomNode, below: str, stop: str) -> None:
    """409 while the Node, or a Node under it, is queued or running."""
    stop = stop.format(loom_id=tree.loom.id)
    if node.status in GROWING:
        raise LoomConflict(NODE_GROWING.format(status=node.status.value, stop=stop))
    if tree.growing(tree.subtree(node.id)):
        raise LoomConflict(below.format(stop=stop))


def _refuse_rewrite(tree: LoomTree, node: LoomNode, stop: str) -> None:
    """An edit or a split: never of a failed Node, nor while its Branch or one under it grows."""
    if node.status == NodeStatus.failed:
        raise LoomConflict(FAILED)
    _refuse_growing(tree, node, GROWING_BELOW, stop)


async def _commit(session: AsyncSession, tree: LoomTree, now: datetime, *rows: LoomNode) -> LoomTree:
    touch(tree.loom, now)
    session.add(tree.loom)
    for row in rows:
        session.add(row)
    await session.commit()
    return await read(session, tree.loom.id, tree.loom.user_id)


# -- edit --------------------------------------------------------------------------------------------


async def edit(session: AsyncSession, loom_id: uuid.UUID, user_id: uuid.UUID, node_id: uuid.UUID,
               text: str, now: datetime, *, stop: str = STOP_ROUTE) -> LoomTree:
    """Rewrite the Node's text. Its log probabilities were of the old text, so they go; the
    Nodes under it keep their own text, and their paths' text changes with it."""
    tree = await load(session, loom_id, user_id, lock=True)
    node = tree.node(node_id)
    _refuse_rewrite(tree, node, stop)
    if text == node.text:
        return await read(session, loom_id, user_id)  # the same text changes nothing, nor moves the Loom
    node.text, node.logprobs, node.text_modified = text, None, True
    below = [row for row in tree.subtree(node_id) if row.id != node_id]
    for row in below:
        row.context_modified = True
    return await _commit(session, tree, now, node, *below)


# -- split -------------------------------------------------------------------------------------------


def split_logprobs(logprobs: dict | None, cut: int) -> tuple[dict | None, dict | None]:
    """The log probabilities of the whole tokens on each side of a cut at `cut` code points.

    A token spans [text_offset, text_offset + len(token)). The Node keeps each token that ends
    at or before the cut; the child gets each token that starts at or after it, its offsets
    counted from the cut. The guide's "A token across the cut leaves the new child none" reads
    as the child having no log probabilities at all then: its text starts inside that token, so
    none of its tokens would line up with its start, while the Node still keeps its whole tokens.
    A half with no token has none (null).
    """
    if logprobs is None:
        return None, None
    tokens = list(zip(logprobs["text_offset"], logprobs["token_logprobs"], logprobs["tokens"],
                      logprobs["top_logprobs"]))
    before = [token for token in tokens if token[0] + len(token[2]) <= cut]
    after = [token for token in tokens[len(before):] if token[0] >= cut]
    across = len(before) + len(after) < len(tokens)
    shifted = [(offset - cut, *rest) for offset, *rest in after]
    return _logprobs_of(before), None if across else _logprobs_of(shifted)


def _logprobs_of(tokens: list[tuple]) -> dict | None:
    if not tokens:
        return None
    offsets, token_logprobs, texts, tops = (list(column) for column in zip(*tokens))
    return {"text_offset": offsets, "token_logprobs": token_logprobs, "tokens": texts, "top_logprobs": tops}


def _dumps(value: object) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"))


def _unseeded(request: str | None) -> str | None:
    """A part of a sample cannot be sampled again: the same request without its seed."""
    if request is None:
        return None
    return _dumps({**json.loads(request), "seed": None})


async def split(session: AsyncSession, loom_id: uuid.UUID, user_id: uuid.UUID, node_id: uuid.UUID,
                offset: int, text: str | None, now: datetime, *, stop: str = STOP_ROUTE) -> LoomTree:
    """Cut the Node at `offset` code points (past the end: at the end), or cut the edited `text`.

    The Node keeps the text before the cut; a new child gets the text after it and the Node's
    children, in their order, so every path keeps its text. `slice_offset` and `slice_end` mark
    each part's range of code points within the text that the Node's first split cut.
    """
    tree = await load(session, loom_id, user_id, lock=True)
    node = tree.node(node_id)
    _refuse_rewrite(tree, node, stop)
    check_room(tree, 1)
    whole = node.text if text is None else text
    cut = min(offset, len(whole))
    edited = text is not None and text != node.text
    if text is None:
        kept, moved = split_logprobs(json.loads(node.logprobs) if node.logprobs else None, cut)
    else:
        kept = moved = None  # they were of the old text
    below = [row for row in tree.subtree(node.id) if row.id != node.id]
    start = node.slice_offset or 0
    child = LoomNode(loom_id=loom_id, parent_id=node.id, position=0, status=node.status, text=whole[cut:],
                     logprobs=_dumps(moved), request=_unseeded(node.request), created_at=now,
                     text_modified=node.text_modified or edited, context_modified=node.context_modified,
                     slice_offset=start + cut, slice_end=start + len(whole))
    for row in below:
        if row.parent_id == node.id:
            row.parent_id = child.id  # keeps its position: the children keep their order
        row.context_modified = row.context_modified or edited  # an edited cut changes their paths
    node.text, node.logprobs = whole[:cut], _dumps(kept)
    node.text_modified = node.text_modified or edited
    node.slice_offset, node.slice_end = start, start + cut
    return await _commit(session, tree, now, node, child, *below)


# -- sibling, new root -------------------------------------------------------------------------------


async def add_sibling(session: AsyncSession, loom_id: uuid.UUID, user_id: uuid.UUID, node_id: uuid.UUID,
                      text: str, now: datetime, *, stop: str = STOP_ROUTE,
                      new_root: str = NEW_ROOT_ROUTE) -> LoomTree:
    """A completed Node of your text under the Node's parent, after its last sibling."""
    tree = await load(session, loom_id, user_id, lock=True)
    node = tree.node(node_id)
    if node.parent_id is None:
        raise LoomConflict(ROOT_SIBLING.format(new_root=new_root.format(loom_id=loom_id)))
    parent = tree.node(node.parent_id)
    if tree.growing(row for row in tree.subtree(parent.id) if row.id != parent.id):
        raise LoomConflict(GROWING_BESIDE.format(stop=stop.format(loom_id=loom_id)))
    check_room(tree, 1)
    position = max(row.position for row in tree.children(parent.id)) + 1
    sibling = LoomNode(loom_id=loom_id, parent_id=parent.id, position=position, status=NodeStatus.completed,
                       text=text, created_at=now)
    return await _commit(session, tree, now, sibling)


async def new_root(session: AsyncSession, loom_id: uuid.UUID, user_id: uuid.UUID, text: str,
                   now: datetime, *, stop: str = STOP_ROUTE) -> LoomTree:
    """Replace the whole tree with one completed root, your text."""
    tree = await load(session, loom_id, user_id, lock=True)
    if tree.growing():
        raise LoomConflict(growing_loom(loom_id, stop))
    await mark_deleted(session, tree.nodes, now)
    root = LoomNode(loom_id=loom_id, parent_id=None, position=0, status=NodeStatus.completed, text=text,
                    created_at=now)
    return await _commit(session, tree, now, root)


# -- delete ------------------------------------------------------------------------------------------


async def delete_node(session: AsyncSession, loom_id: uuid.UUID, user_id: uuid.UUID, node_id: uuid.UUID,
                      now: datetime, *, stop: str = STOP_ROUTE, delete_loom: str = DELETE_LOOM_ROUTE) -> LoomTree:
    """Delete the Node and every Node under it; they are gone at once."""
    tree = await load(session, loom_id, user_id, lock=True)
    node = tree.node(node_id)
    if node.parent_id is None:
        raise LoomConflict(ROOT_DELETE.format(delete_loom=delete_loom.format(loom_id=loom_id)))
    gone = tree.subtree(node_id)
    if tree.growing(gone):
        raise LoomConflict(DELETE_GROWING.format(stop=stop.format(loom_id=loom_id)))
    await mark_deleted(session, gone, now)
    return await _commit(session, tree, now)


# -- import ------------------------------------------------------------------------------------------


async def insert_imported(session: AsyncSession, user_id: uuid.UUID, title: str, nodes: list[LoomNode],
                          now: datetime) -> LoomTree:
    """A new Loom of the Nodes that an import read, with their ids, parents and places as given."""
    loom = Loom(user_id=user_id, created_at=now, updated_at=now, title=title)
    session.add(loom)
    await session.flush()
    for node in nodes:
        node.loom_id, node.created_at = loom.id, now
        session.add(node)
    await session.commit()
    return await read(session, loom.id, user_id)
