"""An admin's warm windows (spec: "Keep a model Warm"): each records the admin who made it, and shows
what it costs."""
from __future__ import annotations

import uuid
from typing import Any

from domain.operations import documents, warm_windows
from domain.operations.platform import platform_of_services
from domain.services import Services


async def list_windows(services: Services, model_id: str | None) -> dict[str, Any]:
    """Every window that still counts, with its cost, and each served model with its Floor and what
    its windows cost in the next 7 days; one model's when `model_id` is given."""
    async with services.sessions() as session:
        models, lines = await warm_windows.warm_tab(session, platform_of_services(services), model_id)
    return documents.warm_tab(models, lines)


async def add_window(services: Services, model_id: str, days: list[int], start: int, end: int, zone: str,
                     by: str) -> dict[str, Any]:
    """A weekly window on `days` (ISO weekdays) from minute `start` to `end` of the day in `zone`."""
    async with services.ledger.write_sessions() as session:
        line = await warm_windows.add_window(session, platform_of_services(services), model_id, days, start,
                                             end, zone, by)
    return documents.window_line(line)


async def warm_now(services: Services, model_id: str, hours: int, by: str) -> dict[str, Any]:
    """Warm from now for `hours`; the window ends by itself."""
    async with services.ledger.write_sessions() as session:
        line = await warm_windows.warm_now(session, platform_of_services(services), model_id, hours, by)
    return documents.window_line(line)


async def remove_window(services: Services, window_id: uuid.UUID) -> dict[str, Any]:
    """Stop a window; the answer is the window as it was, with what it cost."""
    async with services.ledger.write_sessions() as session:
        return documents.window_line(
            await warm_windows.remove_window(session, platform_of_services(services), window_id))
