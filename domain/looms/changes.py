"""The tree's edits that you write yourself: edit, split, sibling, new root, delete a Node
(spec: "Change the tree", "Delete a Node or a Loom").

Each parses its body as strictly as Completions does (the NodeText and SplitRequest
schemas: an unknown field, a wrong type or a NUL gets 400 invalid_request), stores a
CRLF or a lone CR as LF, and runs its change in one ledger transaction
(`ledger.work.loom_changes`), which answers 409 or 404 by the states it finds. Each answers
the whole Loom after the change.
"""
from __future__ import annotations

from typing import Any

from domain import errors
from domain.completions.validation import Msg, integer, reject_unknown_fields, text
from domain.looms.ids import parse_id
from domain.looms.views import loom_json
from domain.looms.wording import Wording
from domain.services import Services
from ledger.work import loom_changes
from ledger.store.coltypes import utcnow
from ledger.work.looms import normalize_newlines
from ledger.accounts.keys import Principal


def _fields(body: Any, known: tuple[str, ...], required: str) -> dict:
    """The body's fields; null is the same as leaving a field out (DESIGN.md)."""
    if not isinstance(body, dict):
        raise errors.InvalidRequest(Msg.BODY)
    reject_unknown_fields(body, known)
    if body.get(required) is None:
        raise errors.InvalidRequest(Msg.MISSING.format(path=required), required)
    return {key: value for key, value in body.items() if value is not None}


def parse_node_text(body: Any) -> str:
    """NodeText: `text`, required."""
    fields = _fields(body, ("text",), "text")
    return normalize_newlines(text(fields["text"], "text"))


def parse_split(body: Any) -> tuple[int, str | None]:
    """SplitRequest: `offset` (an integer from 0, required) and an edited `text`."""
    fields = _fields(body, ("offset", "text"), "offset")
    offset = integer(fields["offset"], "offset", ge=0)
    edited = fields.get("text")
    return offset, None if edited is None else normalize_newlines(text(edited, "text"))


async def _write(services: Services, change: Any, *args: Any, **ways: str) -> dict:
    """`ways`: how the change's refusals name the way past them, as the caller's Wording says."""
    async with services.ledger.write_sessions() as session:
        return loom_json(await change(session, *args, utcnow(), **ways))


async def edit(services: Services, loom_id: str, node_id: str, body: Any, principal: Principal,
               wording: Wording) -> dict:
    loom, node = parse_id(loom_id, "loom"), parse_id(node_id, "node")
    new_text = parse_node_text(body)
    return await _write(services, loom_changes.edit, loom, principal.user_id, node, new_text, stop=wording.stop)


async def split(services: Services, loom_id: str, node_id: str, body: Any, principal: Principal,
                wording: Wording) -> dict:
    loom, node = parse_id(loom_id, "loom"), parse_id(node_id, "node")
    offset, edited = parse_split(body)
    return await _write(services, loom_changes.split, loom, principal.user_id, node, offset, edited,
                        stop=wording.stop)


async def sibling(services: Services, loom_id: str, node_id: str, body: Any, principal: Principal,
                  wording: Wording) -> dict:
    loom, node = parse_id(loom_id, "loom"), parse_id(node_id, "node")
    new_text = parse_node_text(body)
    return await _write(services, loom_changes.add_sibling, loom, principal.user_id, node, new_text,
                        stop=wording.stop, new_root=wording.new_root)


async def new_root(services: Services, loom_id: str, body: Any, principal: Principal, wording: Wording) -> dict:
    loom = parse_id(loom_id, "loom")
    new_text = parse_node_text(body)
    return await _write(services, loom_changes.new_root, loom, principal.user_id, new_text, stop=wording.stop)


async def delete_node(services: Services, loom_id: str, node_id: str, principal: Principal,
                      wording: Wording) -> dict:
    loom, node = parse_id(loom_id, "loom"), parse_id(node_id, "node")
    return await _write(services, loom_changes.delete_node, loom, principal.user_id, node,
                        stop=wording.stop, delete_loom=wording.delete_loom)
