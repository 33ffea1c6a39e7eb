"""Admin routes of Users: list, make, show, suspend, restore, allowance, role, tags; their Grants,
Budgets (a key's own too), keys and usage. HTTP in and out; the logic is `ledger/operations/`."""
from __future__ import annotations

from fastapi import APIRouter, Request

from api.admin import bodies, context
from api.auth import AdminDep
from domain.completions.validation import bad_value, text
from domain.error_mapping import ledger_refusals
from ledger.accounts.tables import Role, Standing
from domain.operations import api_keys, documents, tokens, usage_report, users

router = APIRouter(prefix="/v1/admin/users")
USER = "a User id"
KEY = "an API key id"


@router.get("")
async def list_users(request: Request, admin: AdminDep):
    query, platform = bodies.read_query(request, ("tag",)), context.platform(request)
    async with context.reads(request) as session:
        with ledger_refusals("tag"):
            lines = await users.user_lines(session, platform, query.get("tag"))
    return {"users": [documents.user_line(line, platform.clock()) for line in lines]}


@router.post("")
async def create_user(request: Request, admin: AdminDep):
    body = await bodies.read_fields(request, ("name",))
    name = text(bodies.required(body, "name"), "name")
    async with context.writes(request) as session:
        with ledger_refusals("name"):
            return documents.user_brief(await users.create_user(session, name))


@router.get("/{user_id}")
async def show_user(user_id: str, request: Request, admin: AdminDep):
    who, platform = bodies.path_id(user_id, "user_id", USER), context.platform(request)
    async with context.reads(request) as session:
        with ledger_refusals():
            return documents.user_page(await users.user_page(session, platform, who), platform.clock())


async def _standing(user_id: str, request: Request, admin: AdminDep, standing: Standing) -> dict:
    who = bodies.path_id(user_id, "user_id", USER)
    await bodies.read_fields(request, ())
    async with context.writes(request) as session:
        with ledger_refusals():
            return documents.user_brief(await users.set_standing(session, who, standing, acting=admin.user_id))


@router.post("/{user_id}/suspend")
async def suspend_user(user_id: str, request: Request, admin: AdminDep):
    return await _standing(user_id, request, admin, Standing.suspended)


@router.post("/{user_id}/restore")
async def restore_user(user_id: str, request: Request, admin: AdminDep):
    return await _standing(user_id, request, admin, Standing.active)


@router.post("/{user_id}/allowance")
async def set_allowance(user_id: str, request: Request, admin: AdminDep):
    """`tokens`: the monthly allowance, or null for the platform's default."""
    who = bodies.path_id(user_id, "user_id", USER)
    body = await bodies.read_fields(request, ("tokens",))
    wanted = None if body.get("tokens") is None else bodies.tokens(body, "tokens", least=0)
    async with context.writes(request) as session:
        with ledger_refusals():
            user, allowance = await users.set_allowance(session, context.platform(request), who, wanted)
    return {"user": documents.user_brief(user), "monthly_allowance": allowance,
            "allowance_is_default": wanted is None}


@router.post("/{user_id}/role")
async def set_role(user_id: str, request: Request, admin: AdminDep):
    who = bodies.path_id(user_id, "user_id", USER)
    body = await bodies.read_fields(request, ("role",))
    role = text(bodies.required(body, "role"), "role")
    if role not in Role.__members__:
        raise bad_value("role", "admin or user")
    async with context.writes(request) as session:
        with ledger_refusals("role"):
            return documents.user_brief(await users.set_role(session, who, Role(role), acting=admin.user_id))


@router.post("/{user_id}/tags")
async def add_tag(user_id: str, request: Request, admin: AdminDep):
    who = bodies.path_id(user_id, "user_id", USER)
    tag = text(bodies.required(await bodies.read_fields(request, ("tag",)), "tag"), "tag")
    async with context.writes(request) as session:
        with ledger_refusals("tag"):
            user, tags = await users.add_tag(session, who, tag)
    return {"user": documents.user_brief(user), "tags": tags}


@router.delete("/{user_id}/tags/{tag}")
async def remove_tag(user_id: str, tag: str, request: Request, admin: AdminDep):
    who = bodies.path_id(user_id, "user_id", USER)
    async with context.writes(request) as session:
        with ledger_refusals("tag"):
            user, tags = await users.remove_tag(session, who, tag)
    return {"user": documents.user_brief(user), "tags": tags}


# Grants and Budgets ------------------------------------------------------------------------
@router.post("/{user_id}/grants")
async def grant(user_id: str, request: Request, admin: AdminDep):
    """Add tokens to the User's Budget, or with `key_id` to that key's own Budget."""
    who = bodies.path_id(user_id, "user_id", USER)
    body = await bodies.read_fields(request, ("tokens", "key_id", "note"))
    amount = bodies.tokens(body, "tokens", least=1)
    key_id, note = bodies.optional_id(body, "key_id", KEY), bodies.optional_text(body, "note")
    async with context.writes(request) as session:
        with ledger_refusals("note"):
            return documents.budget_left(await tokens.grant(session, who, amount, key_id=key_id, note=note))


@router.post("/{user_id}/budget")
async def set_budget(user_id: str, request: Request, admin: AdminDep):
    """Set the User's Budget, or with `key_id` that key's own Budget, to a number."""
    who = bodies.path_id(user_id, "user_id", USER)
    body = await bodies.read_fields(request, ("tokens", "key_id"))
    amount, key_id = bodies.tokens(body, "tokens", least=0), bodies.optional_id(body, "key_id", KEY)
    async with context.writes(request) as session:
        with ledger_refusals():
            return documents.budget_left(await tokens.set_budget(session, who, amount, key_id=key_id))


# Keys and usage --------------------------------------------------------------------------------
@router.get("/{user_id}/keys")
async def list_keys(user_id: str, request: Request, admin: AdminDep):
    """The User's keys; `?all=true` lists the revoked ones too."""
    who = bodies.path_id(user_id, "user_id", USER)
    bodies.read_query(request, ("all",))
    every = bodies.query_flag(request, "all")
    async with context.reads(request) as session:
        with ledger_refusals():
            user, lines = await api_keys.key_lines(session, context.platform(request).clock(), who,
                                                   include_revoked=every)
    return documents.key_lines(user, lines)


@router.post("/{user_id}/keys")
async def create_key(user_id: str, request: Request, admin: AdminDep):
    """A new key for the User; the whole key is in this answer only (`key`)."""
    who = bodies.path_id(user_id, "user_id", USER)
    name = text(bodies.required(await bodies.read_fields(request, ("name",)), "name"), "name")
    async with context.writes(request) as session:
        with ledger_refusals("name"):
            user, key, raw_key = await api_keys.create_key(session, who, name)
    return {"user": documents.user_brief(user), "id": str(key.id), "name": key.name, "prefix": key.prefix,
            "key": raw_key}


async def _key_action(user_id: str, key_id: str, request: Request, action: str) -> dict:
    who, key = bodies.path_id(user_id, "user_id", USER), bodies.path_id(key_id, "key_id", KEY)
    await bodies.read_fields(request, ())
    async with context.writes(request) as session:
        with ledger_refusals():
            await api_keys.set_key_status(session, key, action, who=who)
            return documents.key_page(await api_keys.key_page(session, context.platform(request).clock(), key))


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
    async with context.reads(request) as session:
        with ledger_refusals():
            report = await usage_report.usage_report(session, context.platform(request).clock(), who, key_id=key_id,
                                                     first=first, last=last)
    return documents.usage_report(report)
