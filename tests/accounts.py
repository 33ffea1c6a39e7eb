"""A stack's User and key in the ledger: who the key is, its tokens, what is left."""
from __future__ import annotations

import uuid
from typing import Any

from ledger.tokens.grants import grant, set_allowance, standing
from ledger.accounts.keys import Principal, authenticate, create_api_key, create_user


async def principal(stack: Any) -> Principal:
    async with stack.services.sessions() as session:
        return await authenticate(session, f"Bearer {stack.key}")


async def set_tokens(stack: Any, allowance: int | None = None, budget: int = 0, key_budget: int = 0) -> Principal:
    who = await principal(stack)
    async with stack.services.ledger.write_sessions() as session:
        await set_allowance(session, who.user_id, allowance)
    for tokens, key_id in ((budget, None), (key_budget, who.key_id)):
        if tokens:
            async with stack.services.ledger.write_sessions() as session:
                await grant(session, who.user_id, tokens, key_id=key_id)
    return who


async def left(stack: Any) -> Any:
    who = await principal(stack)
    async with stack.services.sessions() as session:
        return await standing(session, who.user_id, who.key_id)


async def another_key(stack: Any, same_user: bool = True) -> str:
    """Another key of the stack's User, or the key of a new User."""
    async with stack.services.ledger.write_sessions() as session:
        user_id = (await principal(stack)).user_id if same_user else (
            await create_user(session, f"user-{uuid.uuid4().hex[:8]}")).id
        _, raw = await create_api_key(session, user_id, f"k-{uuid.uuid4().hex[:6]}")
        await session.commit()
    return raw
