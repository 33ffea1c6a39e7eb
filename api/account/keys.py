"""The App's API Keys page: the signed-in User's keys, made, renamed, paused, resumed and revoked.

HTTP in and out; the logic is `domain/operations/own_keys.py`. A key is shown whole only in the
answer that made it.
"""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from api.account.session import AccountDep
from api.admin import bodies, context
from domain.completions.validation import text
from domain.error_mapping import account_refusals
from ledger.tokens import usage
from ledger.accounts.keys import MAX_LIVE_KEYS
from domain.operations import own_keys
from domain.operations.documents import iso

router = APIRouter(prefix="/keys")
KEY = "an API key id"


def key_document(line: usage.KeyLine) -> dict[str, Any]:
    key = line.key
    return {"id": str(key.id), "name": key.name, "prefix": key.prefix, "status": key.status.value,
            "tokens_this_month": line.tokens_this_month, "budget_left": line.budget_left,
            "last_used_at": iso(key.last_used_at), "created_at": iso(key.created_at)}


@router.get("")
async def list_keys(request: Request, account: AccountDep):
    bodies.read_query(request, ())
    async with context.reads(request) as session:
        lines = await own_keys.key_lines(session, account.user_id, context.platform(request).clock())
    return {"data": [key_document(line) for line in lines], "max_keys": MAX_LIVE_KEYS,
            "has_more_room": len(lines) < MAX_LIVE_KEYS}


async def _name(request: Request) -> str:
    return text(bodies.required(await bodies.read_fields(request, ("name",)), "name"), "name")


@router.post("", status_code=201)
async def create_key(request: Request, account: AccountDep):
    name = await _name(request)
    async with context.writes(request) as session:
        with account_refusals("name"):
            line, raw_key = await own_keys.make_key(session, account.user_id, name, context.platform(request).clock())
    return {**key_document(line), "key": raw_key}


@router.post("/{key_id}/rename")
async def rename_key(key_id: str, request: Request, account: AccountDep):
    wanted = bodies.path_id(key_id, "key_id", KEY)
    name = await _name(request)
    async with context.writes(request) as session:
        with account_refusals("name"):
            return key_document(await own_keys.rename(session, account.user_id, wanted, name,
                                                      context.platform(request).clock()))


async def _change(key_id: str, request: Request, account: Any, action: str) -> dict[str, Any]:
    wanted = bodies.path_id(key_id, "key_id", KEY)
    await bodies.read_fields(request, ())
    async with context.writes(request) as session:
        with account_refusals():
            return key_document(await own_keys.change_status(session, account.user_id, wanted, action,
                                                             context.platform(request).clock()))


@router.post("/{key_id}/pause")
async def pause_key(key_id: str, request: Request, account: AccountDep):
    return await _change(key_id, request, account, "pause")


@router.post("/{key_id}/resume")
async def resume_key(key_id: str, request: Request, account: AccountDep):
    return await _change(key_id, request, account, "resume")


@router.post("/{key_id}/revoke")
async def revoke_key(key_id: str, request: Request, account: AccountDep):
    return await _change(key_id, request, account, "revoke")
