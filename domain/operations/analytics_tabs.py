"""The tabs of Analytics that the ledger can count, as documents for some UTC days (spec: "Read
the platform's analytics"; the Spend tab is `spend_page`). The counting is `ledger.tokens.analytics`'s."""
from __future__ import annotations

import uuid
from datetime import date
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.tokens import analytics
from domain.operations import documents
from domain.operations.platform import Platform
from domain.operations.usage_report import days_or_this_month
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
        found = documents.user_numbers(await analytics.user_numbers(session, first, last, now))
    elif name == "budget":
        check_days(first, last)  # the Budget tab counts this month whatever the days
        found = documents.budget_numbers(await analytics.budget_numbers(session, now, platform.monthly_allowance))
    elif name == "platform":
        found = documents.platform_numbers(await analytics.platform_numbers(session, first, last))
    else:
        found = documents.usage_numbers(await analytics.usage_numbers(session, first, last, user_id=user_id,
                                                                      model=model))
    return {**documents.days_of(first, last), **found}
