"""The App's Usage page and each page's 90% notice: what the signed-in User used and has left.

The counting is `domain/operations/usage_page.py`; this opens its transactions and writes its documents.
"""
from __future__ import annotations

import uuid
from datetime import date, datetime
from typing import Any

from domain.account.keys import own_key
from domain.operations import usage_page
from domain.operations.documents import iso
from domain.operations.platform import platform_of_services
from domain.services import Services


async def usage(services: Services, user_id: uuid.UUID, first: date, last: date, key_id: uuid.UUID | None,
                model: str | None, now: datetime) -> dict[str, Any]:
    """The days from `first` to `last`, for one of the User's keys (revoked ones too: By key lists them)
    or one model when given."""
    if key_id is not None:
        async with services.sessions() as session:
            await own_key(session, user_id, key_id)
    filters = usage_page.Filters(first, last, key_id, _model(services, model))
    async with services.sessions() as session:
        page = await usage_page.usage_page(session, user_id, filters, now,
                                           default_allowance=platform_of_services(services).monthly_allowance)
    return usage_document(page, now)


def _model(services: Services, name: str | None) -> str | None:
    """A model by its id or alias; a name that the catalog no longer has is taken as written (old Usage)."""
    if name is None:
        return None
    found = services.catalog.resolve(name)
    return found.id if found is not None else name


async def notice(services: Services, user_id: uuid.UUID) -> dict[str, Any]:
    platform = platform_of_services(services)
    async with services.sessions() as session:
        found = await usage_page.notice(session, user_id, platform.clock(), platform.monthly_allowance)
    return notice_document(found)


# The documents ---------------------------------------------------------------------------------------
def notice_document(found: usage_page.Notice) -> dict[str, Any]:
    return {"show": found.show, "left": found.left, "text": found.text}


def _tokens(found: usage_page.Tokens) -> dict[str, int]:
    return {"input": found.input, "output": found.output, "total": found.total}


def usage_document(page: usage_page.UsagePage, now: datetime) -> dict[str, Any]:
    balance = page.balance
    return {
        "from": page.first.isoformat(), "to": page.last.isoformat(), "updated_at": iso(now),
        "tokens": _tokens(page.tokens),
        "completions": {"count": page.tokens.completions, "running": page.running},
        "allowance": {"total": balance.allowance, "used": balance.allowance_used, "left": balance.allowance_left,
                      "resets_on": balance.resets_on.isoformat()},
        "budget": {"left": balance.budget_left},
        "key_budget": None if balance.key_budget_left is None else {"left": balance.key_budget_left},
        "days": [{"day": day.isoformat(), "input": t.input, "output": t.output} for day, t in page.days.items()],
        "by_model": [{"model": model, **_tokens(t)} for model, t in _most_first(page.by_model)],
        "by_source": [{"source": source, "completions": t.completions, **_tokens(t)}
                      for source, t in _most_first(page.by_source)],
        "by_key": [_key_usage(line) for line in page.by_key],
        "recent": [_completion(row) for row in page.recent],
        "budget_changes": [_budget_change(change) for change in page.budget_changes],
        "notice": notice_document(page.notice),
    }


def _most_first(found: dict[str, usage_page.Tokens]) -> list[tuple[str, usage_page.Tokens]]:
    return sorted(found.items(), key=lambda item: (-item[1].total, item[0]))


def _key_usage(line: usage_page.KeyUsage) -> dict[str, Any]:
    return {"id": str(line.key_id), "name": line.name, "status": line.status.value,
            "input": line.tokens.input, "output": line.tokens.output, "last_month": line.last_month,
            "all_time": line.all_time, "budget_left": line.budget_left,
            "last_used_at": iso(line.last_completion_at)}


def _completion(row: usage_page.CompletionRow) -> dict[str, Any]:
    return {"started_at": iso(row.started_at), "model": row.model, "source": row.source, "key": row.key_name,
            "input": row.input, "output": row.output, "counted": row.counted, "duration_ms": row.duration_ms,
            "status": row.status}


def _budget_change(change: usage_page.BudgetChange) -> dict[str, Any]:
    return {"at": iso(change.at), "tokens": change.tokens, "what": change.what, "key": change.key_name,
            "note": change.note}
