"""The App's API Keys page: the signed-in User's keys, made, renamed, paused, resumed and revoked.

HTTP in and out; the logic is `domain/account/keys.py`. A key is shown whole only in the
answer that made it.
"""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from api.account.session import AccountDep
from api.admin import bodies
from api.auth import services_of
from domain.account import keys
from domain.account.sessions import AccountUser
from domain.completions.validation import text

router = APIRouter(prefix="/keys")
KEY = "an API key id"


@router.get("")
async def list_keys(request: Request, account: AccountDep):
    bodies.read_query(request, ())
    return await keys.list_keys(services_of(request), account.user_id)


async def _name(request: Request) -> str:
    return text(bodies.required(await bodies.read_fields(request, ("name",)), "name"), "name")


@router.post("", status_code=201)
async def create_key(request: Request, account: AccountDep):
    name = await _name(request)
    return await keys.create_key(services_of(request), account.user_id, name)


@router.post("/{key_id}/rename")
async def rename_key(key_id: str, request: Request, account: AccountDep):
    wanted = bodies.path_id(key_id, "key_id", KEY)
    name = await _name(request)
    return await keys.rename_key(services_of(request), account.user_id, wanted, name)


async def _change(key_id: str, request: Request, account: AccountUser, action: str) -> dict[str, Any]:
    wanted = bodies.path_id(key_id, "key_id", KEY)
    await bodies.read_fields(request, ())
    return await keys.change_key(services_of(request), account.user_id, wanted, action)


@router.post("/{key_id}/pause")
async def pause_key(key_id: str, request: Request, account: AccountDep):
    return await _change(key_id, request, account, "pause")


@router.post("/{key_id}/resume")
async def resume_key(key_id: str, request: Request, account: AccountDep):
    return await _change(key_id, request, account, "resume")


@router.post("/{key_id}/revoke")
async def revoke_key(key_id: str, request: Request, account: AccountDep):
    return await _change(key_id, request, account, "revoke")
