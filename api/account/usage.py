"""The App's Usage page and each page's 90% notice: what the signed-in User used and has left.

`GET /account/usage` counts `range` (today, last_7_days, last_30_days, this_month, last_month) or
`from` and `to` (UTC days, at most 366), for one `key` or `model` when given; this month up to today by
default. HTTP in and out; the logic is `domain/account/usage.py`.
"""
from __future__ import annotations

from datetime import date, datetime

from fastapi import APIRouter, Request

from api.account.session import AccountDep
from api.admin import bodies
from api.auth import services_of
from domain import errors
from domain.account import usage
from domain.completions.validation import bad_value, text
from domain.operations import arguments, usage_page

router = APIRouter()
QUERY = ("range", "from", "to", "key", "model")
BOTH_WAYS = "Choose a range, or from and to, not both."


def days_asked(query: dict[str, str], now: datetime) -> tuple[date, date]:
    """The days that the query names: a range, or from and to (both), else this month up to today."""
    if "range" in query and ("from" in query or "to" in query):
        raise errors.InvalidRequest(BOTH_WAYS, "range")
    if "from" in query or "to" in query:
        first = bodies.read_as(arguments.day, text(bodies.required(query, "from"), "from"), "from")
        last = bodies.read_as(arguments.day, text(bodies.required(query, "to"), "to"), "to")
        bodies.read_as(usage_page.check_days, first, "from", last=last)  # the pair's refusal names `from`
        return first, last
    name = query.get("range", "this_month")
    if name not in usage_page.RANGES:
        raise bad_value("range", "one of " + ", ".join(usage_page.RANGES))
    return usage_page.range_days(name, now)


@router.get("/usage")
async def read_usage(request: Request, account: AccountDep):
    services = services_of(request)
    now = services.clock()
    query = bodies.read_query(request, QUERY)
    first, last = days_asked(query, now)
    key_id = bodies.optional_id(query, "key", "an API key id")
    return await usage.usage(services, account.user_id, first, last, key_id, query.get("model"), now)


@router.get("/notice")
async def read_notice(request: Request, account: AccountDep):
    bodies.read_query(request, ())
    return await usage.notice(services_of(request), account.user_id)
