"""An admin's GPU spend and its stop (spec: "Watch the spend"): a Lock and a Clear record who made them."""
from __future__ import annotations

from datetime import date
from typing import Any

from domain.operations import documents, spend_page
from domain.operations.platform import platform_of_services
from domain.services import Services


async def show(services: Services, first: date | None = None, last: date | None = None) -> dict[str, Any]:
    """The last 24 hours' GPU spend, by model, the amounts that warn the team and pause new GPU work,
    the stop, the spend per day from `first` to `last`, and who used each model in the last 48 hours."""
    async with services.sessions() as session:
        return documents.spend_page(await spend_page.spend_page(session, platform_of_services(services), first, last))


async def lock(services: Services, by: str, reason: str) -> dict[str, Any]:
    """Pause new GPU work."""
    async with services.ledger.write_sessions() as session:
        page = await spend_page.lock(session, platform_of_services(services), by, reason)
    return documents.spend_page(page)


async def clear(services: Services, by: str) -> dict[str, Any]:
    async with services.ledger.write_sessions() as session:
        return documents.spend_page(await spend_page.clear(session, platform_of_services(services), by))
