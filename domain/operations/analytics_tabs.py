"""The tabs of Analytics that the ledger can count, as documents for some UTC days (spec: "Read
the platform's analytics"; the Spend tab is `spend_page`). The counting is `ledger.tokens.analytics`'s."""
from __future__ import annotations

import uuid
from datetime import date, timedelta
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.tokens import analytics
from domain.operations import documents
from domain.operations.platform import Platform
from domain.operations.usage_report import days_or_this_month
from ledger.tokens.server_errors import ErrorKind
from ledger.tokens.usage import check_days

TABS = ("users", "budget", "platform", "usage")


async def tab(session: AsyncSession, platform: Platform, name: str, first: date | None = None,
              last: date | None = None, *, user_id: uuid.UUID | None = None,
              model: str | None = None) -> dict[str, Any]:
    """One tab's numbers, for the days from `first` to `last` (this month up to today by default).
    `user_id` and `model` narrow the Usage tab, as its All Users and All models do."""
    now = platform.clock()
    first, last = days_or_this_month(now, first, last)
    if name == "users":
        users = await analytics.user_numbers(session, first, last, now)
        found = {**documents.user_numbers(users), **_user_days(users)}
    elif name == "budget":
        check_days(first, last)  # who is near their allowance is of this month; the refusals are of the days
        budget = await analytics.budget_numbers(session, now, platform.monthly_allowance, first, last)
        found = {**documents.budget_numbers(budget),
                 "daily": [{"day": d.isoformat(), "refused_requests": n} for d, n in budget.refused_per_day.items()]}
    elif name == "platform":
        numbers = await analytics.platform_numbers(session, first, last)
        found = {**documents.platform_numbers(numbers), **_platform_days(numbers, first, last)}
    else:
        found = documents.usage_numbers(await analytics.usage_numbers(session, first, last, user_id=user_id,
                                                                      model=model))
        # What All Users offers: every User with a Completion in the days, whoever is chosen.
        found["users"] = [{"id": str(user_id), "name": user_name}
                          for user_id, user_name in await analytics.users_with_completions(session, first, last)]
    return {**documents.days_of(first, last), **found}


def _user_days(numbers: analytics.UserNumbers) -> dict[str, Any]:
    """The Users tab's Daily numbers, and what waits for a decision."""
    return {"applications_waiting": numbers.applications_waiting,
            "daily": [{"day": d.day.isoformat(), "new_users": d.new_users,
                       "new_users_active_within_24h": d.new_users_active_within_24h,
                       "active_users": d.active_users, "feedback": d.feedback} for d in numbers.daily]}


def _platform_days(numbers: analytics.PlatformNumbers, first: date, last: date) -> dict[str, Any]:
    """The Platform tab's Daily numbers, every day from `first` to `last` (a quiet day reads 0), and its
    Users of each hour in each of five time zones."""
    ended = {d.day: d for d in numbers.days}
    daily = []
    for n in range((last - first).days + 1):
        day = first + timedelta(days=n)
        counts = ended.get(day)
        completed, failed, stopped = (counts.completed, counts.failed, counts.stopped) if counts else (0, 0, 0)
        failures = numbers.errors_by_day.get(day, {})
        daily.append({"day": day.isoformat(), "completed": completed, "failed": failed, "stopped": stopped,
                      "requests": completed + failed + stopped,
                      "server_errors": failures.get(ErrorKind.server_error, 0), "timeouts": failures.get(ErrorKind.timeout, 0),
                      "gpu_usd": documents.usd(numbers.spend_by_day.get(day, 0.0))})
    return {"daily": daily,
            "users_by_hour": [{"time_zone": zone, "users": hours} for zone, hours in numbers.users_by_hour.items()]}
