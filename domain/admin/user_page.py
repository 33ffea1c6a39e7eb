"""What A User's page on Admin reads besides the User (domain/admin/users.py): their Application's answers,
and their Budget and usage counted as the Usage page counts them (domain/account/usage.py) for the days,
key and model that the admin chooses."""
from __future__ import annotations

import uuid
from datetime import date, datetime
from typing import Any

from domain.account import usage
from domain.account.keys import own_key
from domain.operations import users
from domain.operations.documents import iso
from domain.services import Services
from ledger.accounts import applications
from ledger.errors import NotFound, OwnKeyNotFound

# The Apply form's answers, in its order (the page shows each under the form's question).
ANSWERS = ("name", "organization", "planned_usage", "how_you_heard", "links", "expected_tokens")


async def application(services: Services, who: uuid.UUID) -> dict[str, Any]:
    """The Application that made the User, with each answer; `application` is null for a User made by the
    command line or an admin's route, who answered nothing."""
    async with services.sessions() as session:
        user = await users.find_user(session, who)
        found = await applications.application_of_user(session, user.id)
    if found is None:
        return {"application": None}
    return {"application": {
        "id": str(found.id), "email": found.email, "status": found.status.value,
        "created_at": iso(found.created_at), "decided_at": iso(found.decided_at), "decided_by": found.decided_by,
        "answers": {name: getattr(found, name) for name in ANSWERS}}}


async def usage_page(services: Services, who: uuid.UUID, first: date, last: date, key_id: uuid.UUID | None,
                     model: str | None, now: datetime) -> dict[str, Any]:
    """The User's Usage page for these days (one key of theirs or one model when given): the same document
    that GET /account/usage answers the User."""
    async with services.sessions() as session:
        user_id = (await users.find_user(session, who)).id
        if key_id is not None:
            try:
                await own_key(session, user_id, key_id)
            except OwnKeyNotFound:  # its words are the User's own ("You have no API key …")
                raise NotFound(f"This User has no API key with the id {key_id}.") from None
    return await usage.usage(services, user_id, first, last, key_id, model, now)
