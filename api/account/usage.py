"""The App's Usage page and each page's 90% notice: what the signed-in User used and has left.

`GET /account/usage` counts `range` (today, last_7_days, last_30_days, this_month, last_month) or
`from` and `to` (UTC days, at most 366), for one `key` or `model` when given; this month up to today by
default. The counting is `domain/operations/usage_page.py`.
"""
from __future__ import annotations

from datetime import date, datetime
from typing import Any

from fastapi import APIRouter, Request

from api.account.session import AccountDep
from api.admin import bodies, context
from api.auth import services_of
from domain.completions.validation import bad_value, text
from domain.error_mapping import account_refusals
from domain import errors
from domain.operations import usage_page
from domain.operations import arguments, own_keys
from domain.operations.documents import iso

router = APIRouter()
QUERY = ("range", "from", "to", "key", "model")
BOTH_WAYS = "Choose a range, or from and to, not both."


def _days(query: dict[str, str], now: datetime) -> tuple[date, date]:
    """The days that the query names: a range, or from and to (both), else this month up to today."""
    if "range" in query and ("from" in query or "to" in query):
        raise errors.InvalidRequest(BOTH_WAYS, "range")
    if "from" in query or "to" in query:
        first = bodies.read_as(arguments.day, text(bodies.required(query, "from"), "from"), "from")
        last = bodies.read_as(arguments.day, text(bodies.required(query, "to"), "to"), "to")
        with account_refusals("from"):
            usage_page.check_days(first, last)
        return first, last
    name = query.get("range", "this_month")
    if name not in usage_page.RANGES:
        raise bad_value("range", "one of " + ", ".join(usage_page.RANGES))
    return usage_page.range_days(name, now)


def _model(request: Request, query: dict[str, str]) -> str | None:
    """A model by its id or alias; a name that the catalog no longer has is taken as written (old Usage)."""
    name = query.get("model")
    if name is None:
        return None
    found = services_of(request).catalog.resolve(name)
    return found.id if found is not None else name


async def _filters(request: Request, account: Any, now: datetime) -> usage_page.Filters:
    query = bodies.read_query(request, QUERY)
    first, last = _days(query, now)
    key_id = bodies.optional_id(query, "key", "an API key id")
    if key_id is not None:
        async with context.reads(request) as session:
            with account_refusals("key"):
                await own_keys.own_key(session, account.user_id, key_id)  # revoked keys too: By key lists them
    return usage_page.Filters(first, last, key_id, _model(request, query))


@router.get("/usage")
async def read_usage(request: Request, account: AccountDep):
    now = context.platform(request).clock()
    filters = await _filters(request, account, now)
    async with context.reads(request) as session:
        page = await usage_page.usage_page(session, account.user_id, filters, now,
                                           default_allowance=context.platform(request).monthly_allowance)
    return usage_document(page, now)


@router.get("/notice")
async def read_notice(request: Request, account: AccountDep):
    bodies.read_query(request, ())
    platform = context.platform(request)
    async with context.reads(request) as session:
        found = await usage_page.notice(session, account.user_id, platform.clock(), platform.monthly_allowance)
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
