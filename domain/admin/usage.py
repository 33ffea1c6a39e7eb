"""What an admin reads of the counting: a User's usage report, and the Analytics tabs that the ledger
can count (Users, Budget, Platform, Usage; the Spend tab is `domain/admin/spend.py`)."""
from __future__ import annotations

import uuid
from datetime import date
from typing import Any

from domain.operations import analytics_tabs, documents, usage_report
from domain.operations.platform import platform_of_services
from domain.services import Services


async def user_usage(services: Services, who: uuid.UUID, key_id: uuid.UUID | None, first: date | None,
                     last: date | None) -> dict[str, Any]:
    """Settled tokens of each UTC day (this month up to today by default), and the running Holds."""
    async with services.sessions() as session:
        report = await usage_report.usage_report(session, services.clock(), who, key_id=key_id,
                                                 first=first, last=last)
    return documents.usage_report(report)


async def analytics_tab(services: Services, name: str, first: date | None, last: date | None,
                        **narrowed: Any) -> dict[str, Any]:
    """The tab `name` from `first` to `last` (UTC days, this month up to today by default)."""
    async with services.sessions() as session:
        return await analytics_tabs.tab(session, platform_of_services(services), name, first, last, **narrowed)
