"""What a User's own Usage page counts (spec: "Read your usage"), and each page's 90% notice.

A Completion is a Hold that was not released: settled, or still held (running). Its
tokens are what it used, split into input (its prompts, at most what it used) and
output; a running Completion has used nothing yet, so it adds to the counts only.
Days are UTC days, by when a Completion started.
"""
from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Any

import sqlalchemy
from sqlalchemy import case, func, or_
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.tokens import grants
from ledger.accounts import keys
from ledger.errors import LedgerError
from ledger.accounts.tables import ApiKey, KeyStatus
from ledger.tokens.tables import Grant, Hold, HoldState, UsageSource
from ledger.tokens.holds import DEFAULT_MONTHLY_ALLOWANCE, month_of, next_month_start
from ledger.tokens.usage import check_days, key_budgets, midnight, utc_day

NEWEST = 100  # the newest Completions and Budget changes that the page lists
NEAR_END = 0.9  # the notice shows from 90% of the tokens used
RANGES = ("today", "last_7_days", "last_30_days", "this_month", "last_month")
# The names that the page gives the sources (spec: "the API, the Playground, the Loom, Jobs, or Harvests").
SOURCE_NAMES = {UsageSource.api: "api", UsageSource.job: "jobs", UsageSource.loom: "loom",
                UsageSource.harvest: "harvests", UsageSource.playground: "playground"}
_COUNTED = (HoldState.settled, HoldState.held)  # a released Hold is no Completion


# Days ---------------------------------------------------------------------------------------
def today_of(now: datetime) -> date:
    return now.astimezone(timezone.utc).date()


def range_days(name: str, now: datetime) -> tuple[date, date]:
    """The first and last UTC day of one of the page's named ranges."""
    today = today_of(now)
    month_start = today.replace(day=1)
    if name == "today":
        return today, today
    if name in ("last_7_days", "last_30_days"):
        return today - timedelta(days=int(name.split("_")[1]) - 1), today
    if name == "this_month":
        return month_start, today
    if name == "last_month":
        last = month_start - timedelta(days=1)
        return last.replace(day=1), last
    raise LedgerError(f"{name!r} is not a range: choose one of {', '.join(RANGES)}.")


def days_between(first: date, last: date) -> list[date]:
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


# What the page shows -------------------------------------------------------------------------
@dataclass
class Tokens:
    input: int = 0
    output: int = 0
    completions: int = 0

    @property
    def total(self) -> int:
        return self.input + self.output

    def add(self, input_tokens: int, output_tokens: int, completions: int) -> None:
        self.input += input_tokens
        self.output += output_tokens
        self.completions += completions


@dataclass(frozen=True)
class KeyUsage:
    key_id: uuid.UUID
    name: str
    status: KeyStatus
    tokens: Tokens
    last_month: int
    all_time: int
    budget_left: int | None
    last_completion_at: datetime | None


@dataclass(frozen=True)
class CompletionRow:
    started_at: datetime
    ended_at: datetime | None
    model: str
    source: str
    key_name: str | None
    input: int
    output: int
    counted: str | None  # reported | partial | held; None while it runs
    status: str

    @property
    def duration_ms(self) -> int | None:
        return None if self.ended_at is None else round((self.ended_at - self.started_at).total_seconds() * 1000)


@dataclass(frozen=True)
class BudgetChange:
    at: datetime
    tokens: int
    what: str  # "grant": the only change that the ledger records
    key_name: str | None  # a key's own Budget; None: the User's
    note: str


@dataclass(frozen=True)
class Notice:
    """Each page's notice: from 90% of this month's tokens used."""

    show: bool
    left: int

    @property
    def text(self) -> str:
        return "You have no tokens left." if self.left == 0 else f"You have {self.left:,} tokens left."


@dataclass(frozen=True)
class Balance:
    allowance: int
    allowance_used: int
    budget_left: int
    key_budget_left: int | None
    resets_on: date

    @property
    def allowance_left(self) -> int:
        return max(0, self.allowance - self.allowance_used)


@dataclass
class UsagePage:
    first: date
    last: date
    balance: Balance
    notice: Notice
    tokens: Tokens = field(default_factory=Tokens)
    running: int = 0
    days: dict[date, Tokens] = field(default_factory=dict)
    by_model: dict[str, Tokens] = field(default_factory=lambda: defaultdict(Tokens))
    by_source: dict[str, Tokens] = field(default_factory=lambda: defaultdict(Tokens))
    by_key: list[KeyUsage] = field(default_factory=list)
    recent: list[CompletionRow] = field(default_factory=list)
    budget_changes: list[BudgetChange] = field(default_factory=list)


@dataclass(frozen=True)
class Filters:
    """The page's days and its choices of key and model (None: all)."""

    first: date
    last: date
    key_id: uuid.UUID | None = None
    model: str | None = None


# Reading it ---------------------------------------------------------------------------------
def _input_of() -> Any:
    # A Hold that used fewer tokens than its prompts (a cut stream) counts them all as input.
    return case((col(Hold.prompt_tokens) < col(Hold.used), col(Hold.prompt_tokens)), else_=col(Hold.used))


def _completions(user_id: uuid.UUID, filters: Filters) -> list[Any]:
    where = [Hold.user_id == user_id, col(Hold.state).in_(_COUNTED),
             col(Hold.created_at) >= midnight(filters.first),
             col(Hold.created_at) < midnight(filters.last + timedelta(days=1))]
    if filters.key_id is not None:
        where.append(Hold.key_id == filters.key_id)
    if filters.model is not None:
        where.append(Hold.model == filters.model)
    return where


async def usage_page(session: AsyncSession, user_id: uuid.UUID, filters: Filters, now: datetime, *,
                     default_allowance: int = DEFAULT_MONTHLY_ALLOWANCE) -> UsagePage:
    check_days(filters.first, filters.last)
    # balance() ends the transaction (grants.standing): read it first, then the rest in one snapshot.
    balance = await read_balance(session, user_id, filters.key_id, now, default_allowance)
    page = UsagePage(filters.first, filters.last, balance, await notice(session, user_id, now, default_allowance))
    page.days = {day: Tokens() for day in days_between(filters.first, filters.last)}
    key_tokens = await _count(session, user_id, filters, page)
    page.by_key = await _by_key(session, user_id, key_tokens, now)
    page.recent = await _recent(session, user_id, filters)
    page.budget_changes = await _budget_changes(session, user_id, filters.key_id)
    return page


async def _count(session: AsyncSession, user_id: uuid.UUID, filters: Filters, page: UsagePage) -> dict:
    """Fill the totals, the days, by model and by source; return the tokens of each key."""
    day = utc_day(session, col(Hold.created_at)).label("day")
    running = func.sum(case((col(Hold.state) == HoldState.held, 1), else_=0))
    # SQLAlchemy's select, run by execute: SQLModel's select and exec are typed for at most 4 columns.
    query = (sqlalchemy.select(day, col(Hold.model), col(Hold.source), col(Hold.key_id), func.count(), running,
                               func.sum(_input_of()), func.sum(col(Hold.used)))
             .where(*_completions(user_id, filters))
             .group_by(day, col(Hold.model), col(Hold.source), col(Hold.key_id)))
    by_key: dict[uuid.UUID, Tokens] = defaultdict(Tokens)
    for text, model, source, key_id, n, n_running, input_tokens, used in await session.execute(query):
        input_tokens, used = int(input_tokens or 0), int(used or 0)
        parts = (page.tokens, page.days[date.fromisoformat(str(text)[:10])], page.by_model[model],
                 page.by_source[SOURCE_NAMES.get(source, str(source))])
        for part in (*parts, by_key[key_id]) if key_id is not None else parts:
            part.add(input_tokens, used - input_tokens, n)
        page.running += int(n_running or 0)
    return by_key


async def _by_key(session: AsyncSession, user_id: uuid.UUID, key_tokens: dict[uuid.UUID, Tokens],
                  now: datetime) -> list[KeyUsage]:
    """Each key that ran Completions on those days (revoked ones too), most tokens first."""
    if not key_tokens:
        return []
    found = {key.id: key for key in await keys.list_keys(session, user_id, include_revoked=True)}
    budgets = await key_budgets(session, user_id)
    totals = await _key_totals(session, user_id, list(key_tokens), _last_month(now))
    lines = [_key_usage(found[key_id], tokens, totals.get(key_id, (0, 0, None)), budgets.get(key_id))
             for key_id, tokens in key_tokens.items()]
    return sorted(lines, key=lambda line: (-line.tokens.total, line.name.casefold()))


def _key_usage(key: ApiKey, tokens: Tokens, totals: tuple, budget_left: int | None) -> KeyUsage:
    last_month, all_time, last_at = totals
    return KeyUsage(key.id, key.name, key.status, tokens, last_month, all_time, budget_left, last_at)


def _last_month(now: datetime) -> str:
    return month_of(midnight(today_of(now).replace(day=1)) - timedelta(days=1))


async def _key_totals(session: AsyncSession, user_id: uuid.UUID, key_ids: list[uuid.UUID],
                      last_month: str) -> dict[uuid.UUID, tuple[int, int, datetime | None]]:
    """Each key's tokens last month and in all, and when it last ran a Completion, whatever the filters."""
    in_last_month = func.sum(case((col(Hold.month) == last_month, col(Hold.used)), else_=0))
    query = (select(Hold.key_id, in_last_month, func.sum(col(Hold.used)), func.max(col(Hold.created_at)))
             .where(Hold.user_id == user_id, col(Hold.state).in_(_COUNTED), col(Hold.key_id).in_(key_ids))
             .group_by(col(Hold.key_id)))
    # The query reads the keys of key_ids only, none NULL; the check says so to the type checker.
    return {key_id: (int(month or 0), int(total or 0), _utc(last_at))
            for key_id, month, total, last_at in await session.exec(query) if key_id is not None}


def _utc(moment: Any) -> datetime | None:
    # max() of a timestamp comes back as text from SQLite, without the column's type.
    if moment is None or isinstance(moment, datetime):
        return moment if moment is None or moment.tzinfo else moment.replace(tzinfo=timezone.utc)
    return _utc(datetime.fromisoformat(str(moment)))


async def _recent(session: AsyncSession, user_id: uuid.UUID, filters: Filters) -> list[CompletionRow]:
    query = (select(Hold, ApiKey.name).outerjoin(ApiKey, col(ApiKey.id) == col(Hold.key_id))
             .where(*_completions(user_id, filters)).order_by(col(Hold.created_at).desc()).limit(NEWEST))
    return [_row(hold, key_name) for hold, key_name in await session.exec(query)]


def _row(hold: Hold, key_name: str | None) -> CompletionRow:
    input_tokens = min(hold.prompt_tokens, hold.used)
    return CompletionRow(hold.created_at, hold.ended_at, hold.model, SOURCE_NAMES.get(hold.source, hold.source.value),
                         key_name, input_tokens, hold.used - input_tokens,
                         hold.counting.value if hold.counting else None, hold.status.value)


async def _budget_changes(session: AsyncSession, user_id: uuid.UUID, key_id: uuid.UUID | None) -> list[BudgetChange]:
    """The newest Grants to the User's Budget or a key's; with a key chosen, to the User's and that key's."""
    query = (select(Grant, ApiKey.name).outerjoin(ApiKey, col(ApiKey.id) == col(Grant.key_id))
             .where(Grant.user_id == user_id))
    if key_id is not None:
        query = query.where(or_(col(Grant.key_id).is_(None), col(Grant.key_id) == key_id))
    query = query.order_by(col(Grant.created_at).desc()).limit(NEWEST)
    return [BudgetChange(grant.created_at, grant.tokens, "grant", key_name, grant.note)
            for grant, key_name in await session.exec(query)]


# The balance and the notice -------------------------------------------------------------------------
async def read_balance(session: AsyncSession, user_id: uuid.UUID, key_id: uuid.UUID | None, now: datetime,
                       default_allowance: int = DEFAULT_MONTHLY_ALLOWANCE) -> Balance:
    """What the User (and the chosen key) have left now, after the Holds of running Completions."""
    found = await grants.standing(session, user_id, key_id, now=now, default_allowance=default_allowance)
    return Balance(found.allowance, found.allowance_used, found.budget, found.key_budget,
                   next_month_start(now).date())


async def notice(session: AsyncSession, user_id: uuid.UUID, now: datetime,
                 default_allowance: int = DEFAULT_MONTHLY_ALLOWANCE) -> Notice:
    """Shown from 90% used: this month's tokens against them and what the allowance and Budget have left."""
    found = await grants.standing(session, user_id, now=now, default_allowance=default_allowance)
    used = sum((await keys.tokens_this_month(session, user_id, now)).values())
    left = found.allowance_left + found.budget
    return Notice(show=left == 0 or used >= NEAR_END * (used + left), left=left)
