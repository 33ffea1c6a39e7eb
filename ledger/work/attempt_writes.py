"""What the writers of growing things share (ledger/work/loom_runs.py for Loom Nodes,
ledger/work/runs.py for Playground Runs): JSON columns, and writes conditioned on one attempt."""
from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Update
from sqlmodel.ext.asyncio.session import AsyncSession


def as_json(value: Any) -> str | None:
    """A JSON column's text; None stays NULL."""
    return None if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


async def changed_one(session: AsyncSession, statement: Update, commit: bool) -> bool:
    """Whether the conditioned write found its row: False once the attempt no longer grows it
    (a stop, an end, a later attempt), and then it changed nothing."""
    result = await session.exec(statement)
    if commit:
        await session.commit()
    return result.rowcount == 1
