"""Grants and Budgets: the User's, or one key's own Budget (spec: "Your Budget")."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.tokens import grants
from ledger.accounts.tables import ApiKey, User
from domain.operations import arguments
from domain.operations.api_keys import live_key_of
from domain.operations.users import find_user


@dataclass(frozen=True)
class BudgetLeft:
    """A Budget after a change: the User's (key None) or a key's own."""

    user_id: uuid.UUID
    user_name: str
    key_id: uuid.UUID | None
    key_name: str | None
    tokens: int

    def name(self) -> str:
        if self.key_name is None:
            return f"the Budget of {self.user_name!r}"
        return f"the own Budget of the key {self.key_name!r} of {self.user_name!r}"


async def _whose(session: AsyncSession, who: str | uuid.UUID, key_id: uuid.UUID | None) -> tuple[User, ApiKey | None]:
    user = await find_user(session, who)
    return user, await live_key_of(session, user, key_id) if key_id else None


async def grant(session: AsyncSession, who: str | uuid.UUID, tokens: int, *, key_id: uuid.UUID | None = None,
                note: str = "") -> BudgetLeft:
    """Add tokens to the User's Budget, or to one key's own Budget (which gives the key one)."""
    tokens = arguments.tokens(tokens, least=1)
    note = arguments.short_text(note, "A Grant's note", param="note")
    user, key = await _whose(session, who, key_id)
    user_id, user_name, key_name = user.id, user.name, key.name if key else None
    budget = await grants.grant(session, user_id, tokens, key_id=key_id, note=note)
    return BudgetLeft(user_id, user_name, key_id, key_name, budget.tokens)


async def set_budget(session: AsyncSession, who: str | uuid.UUID, tokens: int, *,
                     key_id: uuid.UUID | None = None) -> BudgetLeft:
    """Set a Budget to a number: it can shrink too."""
    tokens = arguments.tokens(tokens, least=0)
    user, key = await _whose(session, who, key_id)
    user_id, user_name, key_name = user.id, user.name, key.name if key else None
    budget = await grants.set_budget(session, user_id, tokens, key_id=key_id)
    return BudgetLeft(user_id, user_name, key_id, key_name, budget.tokens)
