"""Warm windows as the Models tab shows them: each with what it costs (spec: "Keep a model Warm").

The windows themselves, and when one is on, are `ledger.tokens.warm`'s; this adds the
catalog's prices (in the `Platform`) and the admin who made one.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.tokens import spend, warm
from ledger.errors import NotFound
from ledger.tokens.tables import WarmWindow
from domain.operations.platform import Platform

NEXT_DAYS = timedelta(days=7)


@dataclass(frozen=True)
class WindowLine:
    window: WarmWindow
    on_now: bool
    # A weekly window's hours and cost a week; a Warm now's whole hours and cost.
    hours: float
    usd: float
    next_7_days_usd: float

    @property
    def weekly(self) -> bool:
        return self.window.ends_at is None


def window_line(window: WarmWindow, platform: Platform, now: datetime) -> WindowLine:
    price = platform.replica_hour_usd.get(window.model_id, 0.0)
    hours = warm.hours_per_week(window)
    coming = warm.hours_between(window, now, now + NEXT_DAYS)
    return WindowLine(window, warm.is_on(window, now), hours, hours * price, coming * price)


@dataclass(frozen=True)
class ModelLine:
    """A served model as the Models tab lists it (spec: "Keep a model Warm")."""

    model_id: str
    floor: int  # the replicas that Inference keeps running without requests
    warm_now: bool  # a window keeps one replica now (none while the spend stop is on)
    replica_hour_usd: float  # one Warm hour
    next_7_days_usd: float  # what its windows cost in the next 7 days


async def warm_tab(session: AsyncSession, platform: Platform,
                   model_id: str | None = None) -> tuple[list[ModelLine], list[WindowLine]]:
    """The Models tab: each served model (or the one asked) with its Floor and its windows' cost in the
    next 7 days, and every window that still counts with its cost."""
    lines = await window_lines(session, platform, model_id)
    stopped = (await spend.spend_stop(session)).locked
    models = [line for line in model_lines(platform, lines, stopped) if model_id is None or line.model_id == model_id]
    return models, lines


def model_lines(platform: Platform, lines: list[WindowLine], stopped: bool) -> list[ModelLine]:
    """Each served model with its floor and what its windows cost in the next 7 days. A window that is
    on lifts the floor to one replica, unless the spend stop is on."""
    found = []
    for model_id, price in platform.replica_hour_usd.items():
        own = [line for line in lines if line.window.model_id == model_id]
        warm_now = not stopped and any(line.on_now for line in own)
        floor = platform.floors.get(model_id, 0)
        found.append(ModelLine(model_id, max(floor, 1) if warm_now else floor, warm_now, price,
                               sum(line.next_7_days_usd for line in own)))
    return found


async def window_lines(session: AsyncSession, platform: Platform, model_id: str | None = None) -> list[WindowLine]:
    now = platform.clock()
    return [window_line(window, platform, now) for window in await warm.windows(session, model_id, now=now)]


async def add_window(session: AsyncSession, platform: Platform, model_id: str, days: list[int], start_minute: int,
                     end_minute: int, time_zone: str, by: str) -> WindowLine:
    now = platform.clock()
    window = await warm.add_window(session, model_id, days, start_minute, end_minute, time_zone, by, now,
                                   served=platform.replica_hour_usd.keys())
    return window_line(window, platform, now)


async def warm_now(session: AsyncSession, platform: Platform, model_id: str, hours: int, by: str) -> WindowLine:
    now = platform.clock()
    window = await warm.warm_now(session, model_id, hours, by, now, served=platform.replica_hour_usd.keys())
    return window_line(window, platform, now)


async def remove_window(session: AsyncSession, platform: Platform, window_id: uuid.UUID) -> WindowLine:
    """Stop a window; the answer is the window as it was, with what it cost (the confirmation shows it)."""
    window = await session.get(WarmWindow, window_id)
    line = None if window is None else window_line(window, platform, platform.clock())
    if line is None or not await warm.remove_window(session, window_id):
        raise NotFound(f"No warm window has the id {window_id}.")
    return line
