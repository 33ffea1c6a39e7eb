"""An admin's Users: list, make, show, suspend, restore, allowance, role, tags, Details, and one action on
many Users at once (Selected Users on the Users tab)."""
from __future__ import annotations

import uuid
from typing import Any

from domain.completions.validation import bad_value
from domain.operations import arguments, documents, user_bulk, users
from domain.operations.platform import platform_of_services
from domain.services import Services
from ledger.accounts.tables import Role, Standing


async def list_users(services: Services, tag: str | None) -> dict[str, Any]:
    """Every User, or those with `tag`."""
    platform = platform_of_services(services)
    async with services.sessions() as session:
        lines = await users.user_lines(session, platform, tag)
    return {"users": [documents.user_line(line, platform.clock()) for line in lines]}


async def create_user(services: Services, name: str) -> dict[str, Any]:
    async with services.ledger.write_sessions() as session:
        return documents.user_brief(await users.create_user(session, name))


async def show_user(services: Services, who: uuid.UUID) -> dict[str, Any]:
    platform = platform_of_services(services)
    async with services.sessions() as session:
        return documents.user_page(await users.user_page(session, platform, who), platform.clock())


async def set_standing(services: Services, who: uuid.UUID, standing: str, acting: uuid.UUID) -> dict[str, Any]:
    """`standing`: suspended or active; `acting`, the admin, may not suspend itself."""
    async with services.ledger.write_sessions() as session:
        return documents.user_brief(await users.set_standing(session, who, Standing(standing), acting=acting))


async def delete_user(services: Services, who: uuid.UUID, acting: uuid.UUID) -> dict[str, Any]:
    """Delete from the User's own row: an admin too, never `acting` itself."""
    async with services.ledger.write_sessions() as session:
        user = await users.delete_one(session, who, acting=acting)
        return {**documents.user_brief(user), "deleted_at": documents.iso(user.deleted_at)}


async def set_allowance(services: Services, who: uuid.UUID, wanted: int | None) -> dict[str, Any]:
    """`wanted`: the monthly allowance, or None for the platform's default."""
    async with services.ledger.write_sessions() as session:
        user, allowance = await users.set_allowance(session, platform_of_services(services), who, wanted)
    return {"user": documents.user_brief(user), "monthly_allowance": allowance,
            "allowance_is_default": wanted is None}


async def set_role(services: Services, who: uuid.UUID, role: str, acting: uuid.UUID) -> dict[str, Any]:
    if role not in Role.__members__:
        raise bad_value("role", "admin or user")
    async with services.ledger.write_sessions() as session:
        return documents.user_brief(await users.set_role(session, who, Role(role), acting=acting))


async def add_tag(services: Services, who: uuid.UUID, tag: str) -> dict[str, Any]:
    async with services.ledger.write_sessions() as session:
        user, tags = await users.add_tag(session, who, tag)
    return {"user": documents.user_brief(user), "tags": tags}


async def remove_tag(services: Services, who: uuid.UUID, tag: str) -> dict[str, Any]:
    async with services.ledger.write_sessions() as session:
        user, tags = await users.remove_tag(session, who, tag)
    return {"user": documents.user_brief(user), "tags": tags}


async def set_details(services: Services, who: uuid.UUID, given: dict[str, str | None]) -> dict[str, Any]:
    """Details on the User's page (`organization`, `discord_handle`: those given change): an empty or null value
    clears it, and the Application's organization shows again."""
    async with services.ledger.write_sessions() as session:
        user, details = await users.set_details(session, who, given)
        return {"user": documents.user_brief(user), **documents.user_details(details)}


async def act_on_users(services: Services, action: str, user_ids: list[uuid.UUID], acting: uuid.UUID,
                       tag: str | None, tokens: int | None) -> dict[str, Any]:
    """Selected Users: `changed` lists the ids changed, `refused` each other User with the reason."""
    chosen = user_bulk.read_action(action)
    written = None if tag is None else arguments.read_field(arguments.tag, tag, "tag")
    async with services.ledger.write_sessions() as session:
        result = await user_bulk.act_on_users(session, chosen, user_ids, acting=acting, tag=written, tokens=tokens)
    return {"changed": [str(user_id) for user_id in result.changed],
            "refused": [{"user_id": str(each.user_id), "name": each.name, "email": each.email, "reason": each.reason}
                        for each in result.refused]}
