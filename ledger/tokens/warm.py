"""Warm windows: the times when a model keeps a floor of one replica (spec: "Keep a model Warm").

A weekly window is on, on each of its days, from its From to its To in its time
zone; one whose To is at or before its From ends the next day, so From = To is a
whole day. The times are wall-clock times of the zone: across a change of
daylight saving time a window still opens and closes at its hours, and that
week's window is an hour longer or shorter. A "Warm now" is on from when it
was made for 1 to 24 hours, and then ends by itself.

While the spend stop is on, no window keeps a model Warm (`warm_models`).
The ledger knows no catalog: callers hand in the served model ids, and a price
per hour of one replica for the costs.
"""
from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Iterator
from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlalchemy import delete, or_, select
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.store.coltypes import utcnow
from ledger.errors import UnknownModel, WarmWindowRefused
from ledger.tokens.tables import SpendStop, WarmWindow

MINUTES_A_DAY = 24 * 60
WEEK = timedelta(days=7)
WARM_NOW_HOURS = range(1, 25)


# -- make, remove, list --------------------------------------------------------------------------------

async def add_window(session: AsyncSession, model_id: str, days: Iterable[int], start_minute: int,
                     end_minute: int, time_zone: str, by: str, now: datetime, *,
                     served: Collection[str]) -> WarmWindow:
    """A weekly window: ISO weekdays (1 Monday to 7 Sunday), minutes of the day 0-1439."""
    _check_model(model_id, served)
    row = WarmWindow(model_id=model_id, days=_days_text(days), start_minute=_minute(start_minute, "start_minute"),
                     end_minute=_minute(end_minute, "end_minute"), time_zone=_zone(time_zone).key,
                     created_by=by, created_at=now)
    session.add(row)
    await session.commit()
    return row


async def warm_now(session: AsyncSession, model_id: str, hours: int, by: str, now: datetime, *,
                   served: Collection[str]) -> WarmWindow:
    """A model Warm from `now` for `hours` (1 to 24); it ends by itself."""
    _check_model(model_id, served)
    if isinstance(hours, bool) or not isinstance(hours, int) or hours not in WARM_NOW_HOURS:
        raise WarmWindowRefused(f"Warm now lasts a whole number of hours from 1 to 24, not {hours!r}.", "hours")
    row = WarmWindow(model_id=model_id, starts_at=now, ends_at=now + timedelta(hours=hours),
                     created_by=by, created_at=now)
    session.add(row)
    await session.commit()
    return row


async def remove_window(session: AsyncSession, window_id: uuid.UUID) -> bool:
    """False when no window has the id (removed already)."""
    result = await session.exec(delete(WarmWindow).where(col(WarmWindow.id) == window_id))
    await session.commit()
    return result.rowcount > 0


async def windows(session: AsyncSession, model_id: str | None = None, *,
                  now: datetime | None = None) -> list[WarmWindow]:
    """The windows that still count, oldest first: a Warm now that ended is left out."""
    now = now or utcnow()
    query = select(WarmWindow).where(or_(col(WarmWindow.ends_at).is_(None), col(WarmWindow.ends_at) > now))
    if model_id is not None:
        query = query.where(col(WarmWindow.model_id) == model_id)
    rows = list((await session.execute(query.order_by(col(WarmWindow.created_at), col(WarmWindow.id)))).scalars())
    # A read holds no transaction open; the rows leave the session first, or the rollback expires them.
    session.expunge_all()
    await session.rollback()
    return rows


async def warm_models(session: AsyncSession, now: datetime) -> set[str]:
    """The models that a window keeps Warm now: none while the spend stop is on."""
    stop = (await session.execute(select(col(SpendStop.locked)).where(col(SpendStop.id) == 1))).scalar_one_or_none()
    if stop:
        await session.rollback()
        return set()
    return {window.model_id for window in await windows(session, now=now) if is_on(window, now)}


# -- when a window is on ---------------------------------------------------------------------------------

def is_on(window: WarmWindow, now: datetime) -> bool:
    return any(True for _ in spans(window, now, now + timedelta(microseconds=1)))


def spans(window: WarmWindow, start: datetime, end: datetime) -> Iterator[tuple[datetime, datetime]]:
    """The times (UTC, on to off) that the window is on and that overlap [start, end)."""
    if window.ends_at is not None:
        on, off = window.starts_at or window.created_at, window.ends_at
        if on < end and off > start:
            yield on, off
        return
    zone = ZoneInfo(window.time_zone)
    days = _days_of(window.days)
    # A span starts on its day and may end the next: begin with the local day before `start`.
    day = start.astimezone(zone).date() - timedelta(days=1)
    while day <= end.astimezone(zone).date():
        if day.isoweekday() in days:
            on, off = _span_of(window, day, zone)
            if on < end and off > start:
                yield on, off
        day += timedelta(days=1)


def _span_of(window: WarmWindow, day: date, zone: ZoneInfo) -> tuple[datetime, datetime]:
    ends_next_day = window.end_minute <= window.start_minute
    on = _wall_clock(day, window.start_minute, zone)
    off = _wall_clock(day + timedelta(days=1) if ends_next_day else day, window.end_minute, zone)
    return on, off


def _wall_clock(day: date, minute: int, zone: ZoneInfo) -> datetime:
    # Compared in UTC: aware datetimes of one zone compare by their wall clocks, not their instants.
    # A time that a spring change skips reads with the offset before it (fold 0), so it is an hour later.
    local = datetime.combine(day, time(minute // 60, minute % 60), tzinfo=zone)
    return local.astimezone(timezone.utc)


# -- what a window costs -----------------------------------------------------------------------------------

def hours_per_week(window: WarmWindow) -> float:
    """A weekly window's hours in a week without a change of the clock; a Warm now's whole hours."""
    if window.ends_at is not None:
        return ((window.ends_at - (window.starts_at or window.created_at)).total_seconds()) / 3600
    minutes = (window.end_minute - window.start_minute) % MINUTES_A_DAY or MINUTES_A_DAY
    return len(_days_of(window.days)) * minutes / 60


def hours_between(window: WarmWindow, start: datetime, end: datetime) -> float:
    """The hours the window is on within [start, end): the Next 7 days of the Models tab."""
    seconds = sum((min(off, end) - max(on, start)).total_seconds() for on, off in spans(window, start, end))
    return seconds / 3600


def cost_per_week(window: WarmWindow, replica_hour_usd: float) -> float:
    """Its hours a week times what one replica of the model costs an hour (its GPUs at their price)."""
    return hours_per_week(window) * replica_hour_usd


# -- checks ---------------------------------------------------------------------------------------------

def _check_model(model_id: str, served: Collection[str]) -> None:
    if model_id not in served:
        known = ", ".join(sorted(served))
        raise UnknownModel(f"The model `{model_id}` does not exist. The platform serves {known}.")


def _days_text(days: Iterable[int]) -> str:
    chosen = list(days)
    wrong = [day for day in chosen if isinstance(day, bool) or not isinstance(day, int) or not 1 <= day <= 7]
    if wrong or not chosen:
        raise WarmWindowRefused("A window's days are ISO weekdays from 1 (Monday) to 7 (Sunday), at least one; "
                                f"got {chosen!r}.", "days")
    return ",".join(str(day) for day in sorted(set(chosen)))


def _days_of(text: str) -> set[int]:
    return {int(day) for day in text.split(",") if day}


def _minute(value: int, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MINUTES_A_DAY:
        raise WarmWindowRefused(f"A window's {field} is a minute of the day from 0 to 1439 (00:00 to 23:59), "
                                f"not {value!r}.", field)
    return value


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise WarmWindowRefused(f"The time zone {name!r} is not one of the IANA time zones, such as UTC or "
                                "Europe/Berlin.", "time_zone") from None
