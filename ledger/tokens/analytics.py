"""The platform's numbers, as the Admin page's Analytics tabs count them (spec: "Read the
platform's analytics", "Manage Users").

A Completion is a settled Hold: one that Inference refused before its first token was
released and counts for none of these. The numbers about Users leave the team's
accounts (admins) out. Days are UTC days, by when a Completion started.
"""
from __future__ import annotations

import enum
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Any

from sqlalchemy import func
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from zoneinfo import ZoneInfo

from ledger.accounts.feedback import FeedbackNote
from ledger.accounts.tables import ApiKey, Application, ApplicationStatus, Role, User
from ledger.tokens.tables import (BudgetRefusal, Grant, Hold, HoldState, MonthlyUsage, SpendSample, UsageSource,
                                  UsageStatus)
from ledger.tokens.holds import month_of, next_month_start
from ledger.tokens import server_errors
from ledger.tokens.server_errors import ErrorKind
from ledger.tokens.usage import check_days, midnight, utc_day

NEAR_ALLOWANCE = 0.9  # the Usage page's meter turns orange from 90% used
NEWEST = 100          # the newest Completions and Budget changes a tab lists
CLOSEST = 10          # the Users closest to their allowance
# The Platform tab's Users of each hour, in five time zones: the Americas' two coasts, UTC, Europe and
# East Asia, so an admin sees when each region's Users work without converting hours by hand.
ZONES = ("America/Los_Angeles", "America/New_York", "UTC", "Europe/Berlin", "Asia/Tokyo")


class Engagement(str, enum.Enum):
    """When a User last ran a Completion (spec: "Manage Users")."""

    active = "active"                # in the last 7 days
    cooling = "cooling"              # 8 to 14 days ago
    churned = "churned"              # more than 14 days ago
    not_activated = "not_activated"  # never


def engagement(last_completion: datetime | None, now: datetime) -> Engagement:
    if last_completion is None:
        return Engagement.not_activated
    age = now - last_completion
    if age <= timedelta(days=7):
        return Engagement.active
    return Engagement.cooling if age <= timedelta(days=14) else Engagement.churned


@dataclass(frozen=True)
class Activity:
    """One User's Completions, as the Users tab lists them."""

    last_completion_at: datetime | None
    active_weeks: int               # UTC weeks, Monday to Sunday, with a Completion
    tokens_last_30_days: int
    models: list[str]               # of the last 30 days, most tokens first

    def engagement(self, now: datetime) -> Engagement:
        return engagement(self.last_completion_at, now)


NO_ACTIVITY = Activity(None, 0, 0, [])


def _settled() -> Any:
    return col(Hold.state) == HoldState.settled


def _within(first: date, last: date) -> tuple[Any, Any]:
    return col(Hold.created_at) >= midnight(first), col(Hold.created_at) < midnight(last + timedelta(days=1))


async def activity(session: AsyncSession, now: datetime) -> dict[uuid.UUID, Activity]:
    """Each User's activity that ran a Completion; the others have NO_ACTIVITY."""
    last = dict((await session.exec(
        select(Hold.user_id, func.max(col(Hold.created_at))).where(_settled()).group_by(col(Hold.user_id)))).all())
    day = utc_day(session, col(Hold.created_at))
    weeks: dict[uuid.UUID, set[tuple[int, int]]] = defaultdict(set)
    for user_id, text in await session.exec(select(Hold.user_id, day).where(_settled()).distinct()):
        weeks[user_id].add(date.fromisoformat(str(text)[:10]).isocalendar()[:2])
    recent: dict[uuid.UUID, list[tuple[int, str]]] = defaultdict(list)
    query = (select(Hold.user_id, Hold.model, func.sum(col(Hold.used)))
             .where(_settled(), col(Hold.created_at) >= now - timedelta(days=30))
             .group_by(col(Hold.user_id), col(Hold.model)))
    for user_id, model, used in await session.exec(query):
        recent[user_id].append((int(used or 0), model))
    return {user_id: Activity(_utc(moment), len(weeks[user_id]), sum(t for t, _ in recent[user_id]),
                              [m for _, m in sorted(recent[user_id], key=lambda pair: (-pair[0], pair[1]))])
            for user_id, moment in last.items()}


def _utc(moment: datetime | None) -> datetime | None:
    # max() of the column comes back without the column's type on SQLite: its stored text.
    if moment is None or isinstance(moment, datetime) and moment.tzinfo is not None:
        return moment
    parsed = moment if isinstance(moment, datetime) else datetime.fromisoformat(str(moment))
    return parsed.replace(tzinfo=timezone.utc)


def _aware(moment: Any) -> datetime:
    """A stored time that is never None, in UTC (see _utc)."""
    found = _utc(moment)
    assert found is not None
    return found


# The Users tab -------------------------------------------------------------------------
@dataclass(frozen=True)
class UserDay:
    """The Users tab's numbers of one UTC day (its Daily numbers)."""

    day: date
    new_users: int                    # who joined that day
    new_users_active_within_24h: int  # of those, who ran a Completion within 24 hours of joining
    active_users: int                 # who ran a Completion that day
    feedback: int = 0                 # the Feedback notes sent that day, anonymous ones included


@dataclass(frozen=True)
class UserNumbers:
    users: int                       # every User but admins, as of now
    new_users: int                   # who joined in the days
    new_users_active_within_24h: int  # of those, who ran a Completion within 24 hours of joining
    active_last_7_days: int
    engagement: dict[Engagement, int]
    new_users_per_day: dict[date, int]
    applications_waiting: int = 0    # as of now, whatever the days: what waits for a decision
    daily: list[UserDay] = field(default_factory=list)  # each day from the first to the last


async def user_numbers(session: AsyncSession, first: date, last: date, now: datetime) -> UserNumbers:
    """The numbers about Users, admins (the team's accounts) left out of each."""
    check_days(first, last)
    people = list((await session.exec(select(User.id, User.created_at).where(User.role != Role.admin))).all())
    firsts = dict((await session.exec(select(Hold.user_id, func.min(col(Hold.created_at)))
                                      .where(_settled()).group_by(col(Hold.user_id)))).all())
    lasts = await activity(session, now)
    start, end = midnight(first), midnight(last + timedelta(days=1))
    new = [(user_id, _aware(joined)) for user_id, joined in people if start <= _aware(joined) < end]
    per_day: dict[date, int] = defaultdict(int)
    quick_per_day: dict[date, int] = defaultdict(int)
    for user_id, joined in new:
        per_day[joined.date()] += 1
        begun = _utc(firsts.get(user_id))
        if begun is not None and joined <= begun <= joined + timedelta(hours=24):
            quick_per_day[joined.date()] += 1
    counts = {kind: 0 for kind in Engagement}
    for user_id, _ in people:
        counts[lasts.get(user_id, NO_ACTIVITY).engagement(now)] += 1
    active = await active_users_per_day(session, first, last)
    notes = await feedback_per_day(session, first, last)
    daily = [UserDay(d, per_day.get(d, 0), quick_per_day.get(d, 0), active.get(d, 0), notes.get(d, 0))
             for d in _each_day(first, last)]
    return UserNumbers(len(people), len(new), sum(quick_per_day.values()), counts[Engagement.active], counts,
                       dict(sorted(per_day.items())), await applications_waiting(session), daily)


async def applications_waiting(session: AsyncSession) -> int:
    return (await session.exec(select(func.count()).select_from(Application)
                               .where(Application.status == ApplicationStatus.waiting))).one()


async def active_users_per_day(session: AsyncSession, first: date, last: date) -> dict[date, int]:
    """How many Users, admins left out, ran a Completion on each UTC day that had one."""
    day = utc_day(session, col(Hold.created_at)).label("day")
    query = (select(day, Hold.user_id).join(User, col(User.id) == col(Hold.user_id))
             .where(_settled(), *_within(first, last), User.role != Role.admin).distinct())
    found: dict[date, int] = defaultdict(int)
    for text, _ in await session.exec(query):
        found[date.fromisoformat(str(text)[:10])] += 1
    return dict(found)


async def feedback_per_day(session: AsyncSession, first: date, last: date) -> dict[date, int]:
    """The Feedback notes of each UTC day that had one: an admin's own notes are left out, an
    anonymous one (no User) counts."""
    query = (select(FeedbackNote.created_at).join(User, col(User.id) == col(FeedbackNote.user_id), isouter=True)
             .where(col(FeedbackNote.created_at) >= midnight(first),
                    col(FeedbackNote.created_at) < midnight(last + timedelta(days=1)),
                    (col(User.role) != Role.admin) | col(User.id).is_(None)))
    found: dict[date, int] = defaultdict(int)
    for moment in await session.exec(query):
        found[_aware(moment).date()] += 1
    return dict(found)


def _each_day(first: date, last: date) -> list[date]:
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


# The Budget tab --------------------------------------------------------------------------
@dataclass(frozen=True)
class AllowanceLine:
    user_id: uuid.UUID
    name: str
    allowance: int
    used: int                 # this UTC month, running Holds included
    runs_out_on: date | None  # at the pace of this month so far; None: not this month

    @property
    def share_used(self) -> float:
        return 1.0 if self.allowance <= 0 else self.used / self.allowance


@dataclass(frozen=True)
class BudgetNumbers:
    at_allowance: int
    near_allowance: int  # 90% used or more, not yet all
    closest: list[AllowanceLine]
    # The requests that the Budget could not hold (429 budget_exceeded) in the days (this UTC month when
    # none are given), and of each of those days.
    refused_requests: int = 0
    refused_per_day: dict[date, int] = field(default_factory=dict)


async def budget_numbers(session: AsyncSession, now: datetime, default_allowance: int,
                         first: date | None = None, last: date | None = None) -> BudgetNumbers:
    """Who is at or near their allowance is of this UTC month, whatever the days; the refused
    requests are of the days from `first` to `last` (this month up to now by default)."""
    query = (select(User.id, User.name, User.monthly_allowance, MonthlyUsage.used)
             .outerjoin(MonthlyUsage, (col(MonthlyUsage.user_id) == col(User.id))
                        & (col(MonthlyUsage.month) == month_of(now)))
             .where(User.role != Role.admin))
    lines = [_allowance_line(user_id, name, default_allowance if own is None else own, used or 0, now)
             for user_id, name, own, used in await session.exec(query)]
    at = sum(1 for line in lines if line.share_used >= 1)
    near = sum(1 for line in lines if NEAR_ALLOWANCE <= line.share_used < 1)
    closest = sorted((line for line in lines if line.used > 0), key=lambda line: (-line.share_used, line.name))
    today = now.astimezone(timezone.utc).date()
    first, last = first or today.replace(day=1), last or today
    refused = await refusals_per_day(session, first, last)
    return BudgetNumbers(at, near, closest[:CLOSEST], sum(refused.values()),
                         {d: refused.get(d, 0) for d in _each_day(first, last)})


async def refusals_per_day(session: AsyncSession, first: date, last: date) -> dict[date, int]:
    """The requests that the Budget could not hold on each UTC day that had one."""
    query = select(BudgetRefusal.at).where(col(BudgetRefusal.at) >= midnight(first),
                                           col(BudgetRefusal.at) < midnight(last + timedelta(days=1)))
    found: dict[date, int] = defaultdict(int)
    for at in await session.exec(query):
        found[_aware(at).astimezone(timezone.utc).date()] += 1
    return dict(found)


def _allowance_line(user_id: uuid.UUID, name: str, allowance: int, used: int, now: datetime) -> AllowanceLine:
    month_start = now.astimezone(timezone.utc).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    elapsed = (now - month_start).total_seconds()
    runs_out = None
    if used >= allowance:
        runs_out = now.date()
    elif used > 0 and elapsed > 0:
        # Compared in seconds first: a slow pace's end can lie past the year 9999, which no datetime holds.
        left_s = (allowance - used) / (used / elapsed)
        if left_s < (next_month_start(now) - now).total_seconds():
            runs_out = (now + timedelta(seconds=left_s)).date()
    return AllowanceLine(user_id, name, allowance, int(used), runs_out)


# The Platform tab ----------------------------------------------------------------------
@dataclass(frozen=True)
class DayCounts:
    day: date
    completed: int
    failed: int
    stopped: int


@dataclass(frozen=True)
class Share:
    """The Completions and tokens of one source, model or User in the days."""

    name: str
    completions: int
    tokens: int


@dataclass(frozen=True)
class PlatformNumbers:
    days: list[DayCounts]
    by_source: list[Share]
    by_model: list[Share]
    spend_by_day: dict[date, float]     # GPU USD, as the Spend tab counts it
    spend_by_model: dict[str, float]
    # Of each time zone in ZONES, how many Users (admins left out) ran a Completion in each hour of the
    # day (0 to 23, that zone's clock) on any of the days.
    users_by_hour: dict[str, list[int]] = field(default_factory=dict)
    # The API's 5xx answers and Inference's timeouts of each day that had one (ledger/tokens/server_errors.py).
    errors_by_day: dict[date, dict[ErrorKind, int]] = field(default_factory=dict)


async def platform_numbers(session: AsyncSession, first: date, last: date) -> PlatformNumbers:
    check_days(first, last)
    day = utc_day(session, col(Hold.created_at)).label("day")
    query = (select(day, Hold.status, func.count()).where(_settled(), *_within(first, last))
             .group_by(day, col(Hold.status)))
    counts: dict[date, dict[UsageStatus, int]] = defaultdict(lambda: defaultdict(int))
    for text, status, n in await session.exec(query):
        counts[date.fromisoformat(str(text)[:10])][UsageStatus(status)] += n
    days = [DayCounts(d, c[UsageStatus.completed], c[UsageStatus.failed], c[UsageStatus.stopped])
            for d, c in sorted(counts.items())]
    spend_day, spend_model = await _spend(session, first, last)
    return PlatformNumbers(days, await shares(session, col(Hold.source), first, last),
                           await shares(session, col(Hold.model), first, last), spend_day, spend_model,
                           await users_by_hour(session, first, last), await server_errors.by_day(session, first, last))


async def users_by_hour(session: AsyncSession, first: date, last: date) -> dict[str, list[int]]:
    """How many Users, admins left out, ran a Completion in each hour of the day, in each of ZONES."""
    query = (select(Hold.user_id, Hold.created_at).join(User, col(User.id) == col(Hold.user_id))
             .where(_settled(), *_within(first, last), User.role != Role.admin))
    seen: dict[str, list[set[uuid.UUID]]] = {zone: [set() for _ in range(24)] for zone in ZONES}
    zones = {zone: ZoneInfo(zone) for zone in ZONES}
    for user_id, started in await session.exec(query):
        moment = _aware(started)
        for zone, info in zones.items():
            seen[zone][moment.astimezone(info).hour].add(user_id)
    return {zone: [len(users) for users in hours] for zone, hours in seen.items()}


async def shares(session: AsyncSession, column: Any, first: date, last: date, *, user_id: uuid.UUID | None = None,
                 model: str | None = None) -> list[Share]:
    """Completions and tokens grouped by `column` (a Hold's source or model, or the User's name), most first."""
    query = select(column, func.count(), func.sum(col(Hold.used))).where(_settled(), *_within(first, last))
    if column is col(User.name):
        query = query.join(User, col(User.id) == col(Hold.user_id))
    query = _only(query, user_id, model).group_by(column)
    found = [Share(_name(name), n, int(t or 0)) for name, n, t in await session.exec(query)]
    return sorted(found, key=lambda share: (-share.tokens, share.name))


def _name(value: Any) -> str:
    return value.value if isinstance(value, UsageSource) else str(value)


def _only(query: Any, user_id: uuid.UUID | None, model: str | None) -> Any:
    if user_id is not None:
        query = query.where(Hold.user_id == user_id)
    return query if model is None else query.where(Hold.model == model)


async def _spend(session: AsyncSession, first: date, last: date) -> tuple[dict[date, float], dict[str, float]]:
    query = select(SpendSample.at, SpendSample.model_id, SpendSample.usd).where(
        col(SpendSample.at) >= midnight(first), col(SpendSample.at) < midnight(last + timedelta(days=1)))
    by_day: dict[date, float] = defaultdict(float)
    by_model: dict[str, float] = defaultdict(float)
    for at, model_id, usd in await session.exec(query):
        by_day[at.astimezone(timezone.utc).date()] += usd
        by_model[model_id] += usd
    return dict(sorted(by_day.items())), dict(sorted(by_model.items()))


# The Usage tab ---------------------------------------------------------------------------
@dataclass(frozen=True)
class CompletionLine:
    hold_id: uuid.UUID
    started_at: datetime
    ended_at: datetime | None
    user_name: str
    key_name: str | None
    model: str
    source: UsageSource
    tokens: int
    counting: str | None
    status: UsageStatus

    @property
    def duration_s(self) -> float | None:
        return None if self.ended_at is None else (self.ended_at - self.started_at).total_seconds()


@dataclass(frozen=True)
class BudgetChange:
    at: datetime
    user_name: str
    key_name: str | None  # a key's own Budget; None: the User's
    tokens: int
    note: str


@dataclass(frozen=True)
class UsageNumbers:
    by_user: list[Share]
    by_model: list[Share]
    by_source: list[Share]
    newest_completions: list[CompletionLine]
    newest_budget_changes: list[BudgetChange]


async def usage_numbers(session: AsyncSession, first: date, last: date, *, user_id: uuid.UUID | None = None,
                        model: str | None = None) -> UsageNumbers:
    check_days(first, last)
    return UsageNumbers(
        await shares(session, col(User.name), first, last, user_id=user_id, model=model),
        await shares(session, col(Hold.model), first, last, user_id=user_id, model=model),
        await shares(session, col(Hold.source), first, last, user_id=user_id, model=model),
        await newest_completions(session, first, last, user_id=user_id, model=model),
        await newest_budget_changes(session, first, last, user_id=user_id),
    )


async def users_with_completions(session: AsyncSession, first: date, last: date) -> list[tuple[uuid.UUID, str]]:
    """Each User who ran a Completion in the days, by name: the Usage tab's All Users lists them."""
    query = (select(User.id, User.name).join(Hold, col(Hold.user_id) == col(User.id))
             .where(_settled(), *_within(first, last)).distinct().order_by(col(User.name)))
    return [(user_id, name) for user_id, name in await session.exec(query)]


async def newest_completions(session: AsyncSession, first: date, last: date, *, user_id: uuid.UUID | None = None,
                             model: str | None = None) -> list[CompletionLine]:
    query = (select(Hold, User.name, ApiKey.name)
             .join(User, col(User.id) == col(Hold.user_id))
             .outerjoin(ApiKey, col(ApiKey.id) == col(Hold.key_id))
             .where(_settled(), *_within(first, last)))
    query = _only(query, user_id, model).order_by(col(Hold.created_at).desc()).limit(NEWEST)
    return [CompletionLine(hold.id, hold.created_at, hold.ended_at, user_name, key_name, hold.model, hold.source,
                           hold.used, hold.counting.value if hold.counting else None, hold.status)
            for hold, user_name, key_name in await session.exec(query)]


async def newest_budget_changes(session: AsyncSession, first: date, last: date, *,
                                user_id: uuid.UUID | None = None) -> list[BudgetChange]:
    query = (select(Grant, User.name, ApiKey.name)
             .join(User, col(User.id) == col(Grant.user_id))
             .outerjoin(ApiKey, col(ApiKey.id) == col(Grant.key_id))
             .where(col(Grant.created_at) >= midnight(first),
                    col(Grant.created_at) < midnight(last + timedelta(days=1))))
    if user_id is not None:
        query = query.where(Grant.user_id == user_id)
    query = query.order_by(col(Grant.created_at).desc()).limit(NEWEST)
    return [BudgetChange(grant.created_at, user_name, key_name, grant.tokens, grant.note)
            for grant, user_name, key_name in await session.exec(query)]
