"""An admin's Grants and Budgets: a User's, or with `key_id` one key's own."""
from __future__ import annotations

import uuid
from typing import Any

from domain.operations import documents, tokens
from domain.services import Services


async def grant(services: Services, who: uuid.UUID, amount: int, key_id: uuid.UUID | None,
                note: str) -> dict[str, Any]:
    """Add tokens to the User's Budget, or to the key's own Budget."""
    async with services.ledger.write_sessions() as session:
        return documents.budget_left(await tokens.grant(session, who, amount, key_id=key_id, note=note))


async def set_budget(services: Services, who: uuid.UUID, amount: int, key_id: uuid.UUID | None) -> dict[str, Any]:
    """Set the User's Budget, or the key's own Budget, to a number."""
    async with services.ledger.write_sessions() as session:
        return documents.budget_left(await tokens.set_budget(session, who, amount, key_id=key_id))
