"""Who calls: the API key of a /v1 request (looked up by its hash), and whether the caller is an admin.

The api reads the header and the cookie; this asks the ledger. A refused key raises the spec's 401.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from domain import errors
from domain.account.sessions import AccountUser
from domain.error_mapping import key_refusal_error
from domain.operations.users import admin_name
from domain.services import Services
from ledger.accounts.keys import Principal, authenticate, authenticate_on
from ledger.errors import KeyRefused
from ledger.store import driver_sql


@dataclass(frozen=True)
class Admin:
    """The admin that an admin route acts for: its name is recorded on the changes it makes."""

    user_id: uuid.UUID
    name: str


async def principal_of(services: Services, authorization: str | None) -> Principal:
    """The User and key of `Authorization: Bearer ...`; a missing, wrong, revoked or paused key, or a
    suspended User, raises its errors.AuthError."""
    engine = driver_sql.driven_engine(services.sessions)
    try:
        if engine is not None:
            return await authenticate_on(engine, services.sessions, authorization)
        async with services.sessions() as session:
            return await authenticate(session, authorization)
    except KeyRefused as refusal:
        raise key_refusal_error(refusal) from None


async def admin_of_key(services: Services, principal: Principal) -> Admin:
    """The key's User when it is an admin, else 403 admin_only."""
    async with services.sessions() as session:
        name = await admin_name(session, principal.user_id)
    if name is None:
        raise errors.AdminOnly(errors.ADMIN_ONLY_MESSAGE)
    return Admin(principal.user_id, name)


def admin_of_account(account: AccountUser) -> Admin:
    """The App's signed-in User when it is an admin, else 403 admin_only."""
    if not account.is_admin:
        raise errors.AdminOnly(errors.ADMIN_ONLY_MESSAGE)
    return Admin(account.user_id, account.name)
