"""Admin routes of Users: list, make, show, suspend, restore, allowance, role, tags; their Grants,
Budgets (a key's own too), keys and usage. HTTP in and out; the logic is `domain/admin/`."""
from __future__ import annotations

from fastapi import APIRouter, Request

from api.admin import bodies
from api.auth import AdminDep, services_of
from domain.admin import budgets, keys, usage, users
from domain.auth import Admin
from domain.completions.validation import bad_type, text

router = APIRouter(prefix="/v1/admin/users")
USER = "a User id"
KEY = "an API key id"
DETAILS = ("organization", "discord_handle")


@router.get("")
async def list_users(request: Request, admin: AdminDep):
    query = bodies.read_query(request, ("tag",))
    return await users.list_users(services_of(request), query.get("tag"))


@router.post("")
async def create_user(request: Request, admin: AdminDep):
    body = await bodies.read_fields(request, ("name",))
    name = text(bodies.required(body, "name"), "name")
    return await users.create_user(services_of(request), name)


@router.post("/bulk")
async def act_on_users(request: Request, admin: AdminDep):
    """Selected Users: one `action` on `user_ids`; answers `changed` (ids) and `refused` (each with its reason)."""
    body = await bodies.read_fields(request, ("action", "user_ids", "tag", "tokens"))
    action = text(bodies.required(body, "action"), "action")
    listed = bodies.required(body, "user_ids")
    if not isinstance(listed, list):
        raise bad_type("user_ids", "a list of User ids")
    user_ids = [bodies.path_id(text(each, "user_ids"), "user_ids", USER) for each in listed]
    tag = None if body.get("tag") is None else text(body["tag"], "tag")
    tokens = None if body.get("tokens") is None else bodies.tokens(body, "tokens", least=0)
    return await users.act_on_users(services_of(request), action, user_ids, admin.user_id, tag, tokens)


@router.get("/{user_id}")
async def show_user(user_id: str, request: Request, admin: AdminDep):
    who = bodies.path_id(user_id, "user_id", USER)
    return await users.show_user(services_of(request), who)


async def _standing(user_id: str, request: Request, admin: Admin, standing: str) -> dict:
    who = bodies.path_id(user_id, "user_id", USER)
    await bodies.read_fields(request, ())
    return await users.set_standing(services_of(request), who, standing, admin.user_id)


@router.post("/{user_id}/suspend")
async def suspend_user(user_id: str, request: Request, admin: AdminDep):
    return await _standing(user_id, request, admin, "suspended")


@router.post("/{user_id}/restore")
async def restore_user(user_id: str, request: Request, admin: AdminDep):
    return await _standing(user_id, request, admin, "active")


@router.post("/{user_id}/delete")
async def delete_user(user_id: str, request: Request, admin: AdminDep):
    """Delete the User from their own row (an admin too, but never yourself): a soft delete, see domain/operations."""
    who = bodies.path_id(user_id, "user_id", USER)
    await bodies.read_fields(request, ())
    return await users.delete_user(services_of(request), who, admin.user_id)


@router.post("/{user_id}/allowance")
async def set_allowance(user_id: str, request: Request, admin: AdminDep):
    """`tokens`: the monthly allowance, or null for the platform's default."""
    who = bodies.path_id(user_id, "user_id", USER)
    body = await bodies.read_fields(request, ("tokens",))
    wanted = None if body.get("tokens") is None else bodies.tokens(body, "tokens", least=0)
    return await users.set_allowance(services_of(request), who, wanted)


@router.post("/{user_id}/details")
async def set_details(user_id: str, request: Request, admin: AdminDep):
    """Details on the User's page: `organization` and `discord_handle`, each given one set (null or "" clears it)."""
    who = bodies.path_id(user_id, "user_id", USER)
    body = await bodies.read_fields(request, DETAILS)
    given = {name: None if body[name] is None else text(body[name], name) for name in DETAILS if name in body}
    return await users.set_details(services_of(request), who, given)


@router.post("/{user_id}/role")
async def set_role(user_id: str, request: Request, admin: AdminDep):
    who = bodies.path_id(user_id, "user_id", USER)
    body = await bodies.read_fields(request, ("role",))
    role = text(bodies.required(body, "role"), "role")
    return await users.set_role(services_of(request), who, role, admin.user_id)


@router.post("/{user_id}/tags")
async def add_tag(user_id: str, request: Request, admin: AdminDep):
    who = bodies.path_id(user_id, "user_id", USER)
    tag = text(bodies.required(await bodies.read_fields(request, ("tag",)), "tag"), "tag")
    return await users.add_tag(services_of(request), who, tag)


@router.delete("/{user_id}/tags/{tag}")
async def remove_tag(user_id: str, tag: str, request: Request, admin: AdminDep):
    who = bodies.path_id(user_id, "user_id", USER)
    return await users.remove_tag(services_of(request), who, tag)


# Grants and Budgets ------------------------------------------------------------------------
@router.post("/{user_id}/grants")
async def grant(user_id: str, request: Request, admin: AdminDep):
    """Add tokens to the User's Budget, or with `key_id` to that key's own Budget."""
    who = bodies.path_id(user_id, "user_id", USER)
    body = await bodies.read_fields(request, ("tokens", "key_id", "note"))
    amount = bodies.tokens(body, "tokens", least=1)
    key_id, note = bodies.optional_id(body, "key_id", KEY), bodies.optional_text(body, "note")
    return await budgets.grant(services_of(request), who, amount, key_id, note)


@router.post("/{user_id}/budget")
async def set_budget(user_id: str, request: Request, admin: AdminDep):
    """Set the User's Budget, or with `key_id` that key's own Budget, to a number."""
    who = bodies.path_id(user_id, "user_id", USER)
    body = await bodies.read_fields(request, ("tokens", "key_id"))
    amount, key_id = bodies.tokens(body, "tokens", least=0), bodies.optional_id(body, "key_id", KEY)
    return await budgets.set_budget(services_of(request), who, amount, key_id)


# Keys and usage --------------------------------------------------------------------------------
@router.get("/{user_id}/keys")
async def list_keys(user_id: str, request: Request, admin: AdminDep):
    """The User's keys; `?all=true` lists the revoked ones too."""
    who = bodies.path_id(user_id, "user_id", USER)
    bodies.read_query(request, ("all",))
    return await keys.list_keys(services_of(request), who, bodies.query_flag(request, "all"))


@router.post("/{user_id}/keys")
async def create_key(user_id: str, request: Request, admin: AdminDep):
    """A new key for the User; the whole key is in this answer only (`key`)."""
    who = bodies.path_id(user_id, "user_id", USER)
    name = text(bodies.required(await bodies.read_fields(request, ("name",)), "name"), "name")
    return await keys.create_key(services_of(request), who, name)


async def _key_action(user_id: str, key_id: str, request: Request, action: str) -> dict:
    who, key = bodies.path_id(user_id, "user_id", USER), bodies.path_id(key_id, "key_id", KEY)
    await bodies.read_fields(request, ())
    return await keys.change_key(services_of(request), who, key, action)


@router.post("/{user_id}/keys/{key_id}/pause")
async def pause_key(user_id: str, key_id: str, request: Request, admin: AdminDep):
    return await _key_action(user_id, key_id, request, "pause")


@router.post("/{user_id}/keys/{key_id}/resume")
async def resume_key(user_id: str, key_id: str, request: Request, admin: AdminDep):
    return await _key_action(user_id, key_id, request, "resume")


@router.post("/{user_id}/keys/{key_id}/revoke")
async def revoke_key(user_id: str, key_id: str, request: Request, admin: AdminDep):
    return await _key_action(user_id, key_id, request, "revoke")


@router.get("/{user_id}/usage")
async def user_usage(user_id: str, request: Request, admin: AdminDep):
    """Settled tokens of each UTC day (`from`, `to`: this month up to today), and the running Holds."""
    who = bodies.path_id(user_id, "user_id", USER)
    query = bodies.read_query(request, ("from", "to", "key_id"))
    first, last = bodies.query_day(request, "from"), bodies.query_day(request, "to")
    key_id = bodies.optional_id(query, "key_id", KEY)
    return await usage.user_usage(services_of(request), who, key_id, first, last)
