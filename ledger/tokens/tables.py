"""The tables of tokens: Budgets, monthly usage, Grants, Holds, the spend stop and its
samples, warm windows, Budget refusals, and the App's token requests.
"""
from __future__ import annotations

import enum
import uuid
from datetime import datetime
from typing import ClassVar

from sqlalchemy import (
    BigInteger,
    Column,
    Enum,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    Uuid,
    text,
)
from sqlmodel import Field, SQLModel

from ledger.store.coltypes import UtcDateTime, utcnow
from ledger.store.columns import _created_at, _state, table_of
from ledger.store.ids import uuid7

# -- Tokens: allowances, Budgets, Grants, Holds ------------------------------


class HoldState(str, enum.Enum):
    held = "held"
    settled = "settled"
    released = "released"


class PaysFrom(str, enum.Enum):
    allowance = "allowance"
    budget = "budget"


class UsageSource(str, enum.Enum):
    api = "api"
    job = "job"
    loom = "loom"
    harvest = "harvest"
    playground = "playground"  # a Playground Run


class Counting(str, enum.Enum):
    reported = "reported"  # Inference's usage
    partial = "partial"    # the tokens a cut stream sent
    held = "held"          # the whole Hold: a request stopped without a count


class UsageStatus(str, enum.Enum):
    running = "running"
    completed = "completed"
    failed = "failed"
    stopped = "stopped"


class Budget(SQLModel, table=True):
    """A User's Budget, or one API key's own Budget (key_id set)."""

    __tablename__: ClassVar[str] = "budgets"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    user_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("users.id"), nullable=False, index=True))
    key_id: uuid.UUID | None = Field(
        default=None, sa_column=Column(Uuid(), ForeignKey("api_keys.id"), nullable=True, unique=True)
    )
    # Tokens left. Holds take from it; it never goes below 0.
    tokens: int = Field(default=0, sa_column=Column(BigInteger(), nullable=False, default=0))


class MonthlyUsage(SQLModel, table=True):
    """Tokens of one User's allowance taken in one UTC month (Holds included)."""

    __tablename__: ClassVar[str] = "monthly_usage"

    user_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("users.id"), primary_key=True))
    month: str = Field(sa_column=Column(String(7), primary_key=True))  # "2026-11"
    used: int = Field(default=0, sa_column=Column(BigInteger(), nullable=False, default=0))


class Grant(SQLModel, table=True):
    __tablename__: ClassVar[str] = "grants"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    user_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("users.id"), nullable=False, index=True))
    key_id: uuid.UUID | None = Field(default=None, sa_column=Column(Uuid(), ForeignKey("api_keys.id"), nullable=True))
    tokens: int = Field(sa_column=Column(BigInteger(), nullable=False))
    note: str = Field(default="", sa_column=Column(String(200), nullable=False, default=""))
    created_at: datetime = Field(default_factory=utcnow, sa_column=_created_at())


class Hold(SQLModel, table=True):
    """One request's Hold, and once it ends, its Usage row.

    A Hold is taken whole from this month's allowance or from the Budget
    (`pays_from`), and from the key's own Budget too when it has one. It
    ends once: settled to what the request used, or released (costs nothing).
    `owner` and `lease_until` let a restart release the Holds of requests
    that died with their process.
    """

    __tablename__: ClassVar[str] = "holds"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    user_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("users.id"), nullable=False))
    key_id: uuid.UUID | None = Field(default=None, sa_column=Column(Uuid(), ForeignKey("api_keys.id"), nullable=True))
    source: UsageSource = Field(default=UsageSource.api, sa_column=_state(UsageSource, "source"))
    model: str = Field(sa_column=Column(String(100), nullable=False))
    request_id: str = Field(default="", sa_column=Column(String(64), nullable=False, default=""))
    month: str = Field(sa_column=Column(String(7), nullable=False))
    tokens: int = Field(sa_column=Column(BigInteger(), nullable=False))
    pays_from: PaysFrom = Field(sa_column=_state(PaysFrom, "pays_from"))
    key_budget: bool = Field(default=False, nullable=False)
    state: HoldState = Field(default=HoldState.held, sa_column=_state(HoldState, "state"))
    status: UsageStatus = Field(default=UsageStatus.running, sa_column=_state(UsageStatus, "status"))
    counting: Counting | None = Field(
        default=None,
        sa_column=Column(Enum(Counting, name="counting", native_enum=False, create_constraint=True, length=16,
                              values_callable=lambda m: [x.value for x in m]), nullable=True),
    )
    used: int = Field(default=0, sa_column=Column(BigInteger(), nullable=False, default=0))
    # The prompts' tokens of the request: the Usage page splits `used` into input and output.
    prompt_tokens: int = Field(default=0, sa_column=Column(BigInteger(), nullable=False, default=0, server_default="0"))
    owner: str = Field(default="", sa_column=Column(String(64), nullable=False, default=""))
    lease_until: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))
    created_at: datetime = Field(default_factory=utcnow, sa_column=_created_at())
    ended_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))


_holds = table_of(Hold).c
Index("ix_holds_state_lease_until", _holds.state, _holds.lease_until)
Index("ix_holds_user_id_created_at", _holds.user_id, _holds.created_at)
Index("ix_holds_key_id_month", _holds.key_id, _holds.month)


class SpendStop(SQLModel, table=True):
    """The spend stop: one row; while `locked`, new GPU work gets 429 spend_cap."""

    __tablename__: ClassVar[str] = "spend_stop"

    id: int = Field(default=1, sa_column=Column(BigInteger(), primary_key=True))
    locked: bool = Field(default=False, nullable=False)
    reason: str = Field(default="", sa_column=Column(String(200), nullable=False, default=""))
    changed_at: datetime = Field(default_factory=utcnow, sa_column=_created_at())

# One Budget of the User itself (key_id NULL) per User.
_USER_BUDGET = text("key_id IS NULL")
Index("uq_budgets_user_id_own", table_of(Budget).c.user_id, unique=True,
      postgresql_where=_USER_BUDGET, sqlite_where=_USER_BUDGET)


# -- Operating the cluster: warm windows, the GPU spend, the stop's history ---------------------


class WarmWindow(SQLModel, table=True):
    """A time when a model keeps a floor of one replica (spec: "Keep a model Warm").

    Weekly: on `days` (ISO weekday numbers 1-7, comma-separated) from `start_minute`
    to `end_minute` of the day in `time_zone`; one that ends at or before its start
    ends the next day. "Warm now": `ends_at` set, the days unused.
    """

    __tablename__: ClassVar[str] = "warm_windows"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    model_id: str = Field(sa_column=Column(String(100), nullable=False, index=True))
    days: str = Field(default="", sa_column=Column(String(20), nullable=False, default=""))
    start_minute: int = Field(default=0, sa_column=Column(Integer(), nullable=False, default=0))
    end_minute: int = Field(default=0, sa_column=Column(Integer(), nullable=False, default=0))
    time_zone: str = Field(default="UTC", sa_column=Column(String(64), nullable=False, default="UTC"))
    starts_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))
    ends_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))
    created_by: str = Field(default="", sa_column=Column(String(200), nullable=False, default=""))
    created_at: datetime = Field(default_factory=utcnow, sa_column=_created_at())


class SpendSample(SQLModel, table=True):
    """One minute's estimate of a model's GPU spend, from the replicas that ran and their price."""

    __tablename__: ClassVar[str] = "spend_samples"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    at: datetime = Field(sa_column=Column(UtcDateTime(), nullable=False, index=True))
    model_id: str = Field(sa_column=Column(String(100), nullable=False))
    replicas: int = Field(sa_column=Column(Integer(), nullable=False))
    gpus: float = Field(sa_column=Column(Float(), nullable=False))
    seconds: float = Field(sa_column=Column(Float(), nullable=False))  # the span this sample covers
    usd: float = Field(sa_column=Column(Float(), nullable=False))


class StopChangeKind(str, enum.Enum):
    lock = "lock"    # an admin paused new GPU work
    clear = "clear"  # an admin lifted the pause
    pause = "pause"  # the platform paused it at the stop amount


class SpendStopChange(SQLModel, table=True):
    """Every change of the spend stop, with who made it (spec: "Changes of the stop")."""

    __tablename__: ClassVar[str] = "spend_stop_changes"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    at: datetime = Field(default_factory=utcnow, sa_column=_created_at())
    kind: StopChangeKind = Field(sa_column=_state(StopChangeKind, "kind"))
    by: str = Field(default="", sa_column=Column(String(200), nullable=False, default=""))
    reason: str = Field(default="", sa_column=Column(String(200), nullable=False, default=""))
    usd: float | None = Field(default=None, sa_column=Column(Float(), nullable=True))  # the amount a pause met


class BudgetRefusal(SQLModel, table=True):
    """A request that the tokens could not hold (a 429 budget_exceeded): the Analytics' Budget tab counts them."""

    __tablename__: ClassVar[str] = "budget_refusals"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    at: datetime = Field(default_factory=utcnow, sa_column=Column(UtcDateTime(), nullable=False, index=True))
    user_id: uuid.UUID = Field(sa_column=Column(Uuid(), nullable=False))
    key_id: uuid.UUID | None = Field(default=None, sa_column=Column(Uuid(), nullable=True))
    model: str = Field(sa_column=Column(String(100), nullable=False))
    source: str = Field(sa_column=Column(String(16), nullable=False))
    tokens: int = Field(sa_column=Column(BigInteger(), nullable=False))  # what the request asked to hold


# -- (from ledger/tokens/tables.py)


import enum
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, ForeignKey, Index, String, Text, Uuid, text
from sqlmodel import Field, SQLModel

from ledger.store.coltypes import UtcDateTime
from ledger.store.columns import _created_at, _state
from ledger.store.ids import uuid7

PROJECT_MAX = 200


class TokenRequestStatus(str, enum.Enum):
    waiting = "waiting"
    approved = "approved"
    rejected = "rejected"


class TokenRequest(SQLModel, table=True):
    __tablename__: ClassVar[str] = "token_requests"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    user_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("users.id"), nullable=False, index=True))
    created_at: datetime = Field(sa_column=_created_at())
    tokens: int = Field(sa_column=Column(BigInteger(), nullable=False))  # what the User asked for
    models: list[Any] = Field(default_factory=list, sa_column=Column(JSON(), nullable=False))  # model ids
    project: str = Field(sa_column=Column(String(PROJECT_MAX), nullable=False))
    planned_usage: str = Field(sa_column=Column(Text(), nullable=False))
    # The optional questions: "" when not answered.
    how_you_got_the_number: str = Field(default="", sa_column=Column(Text(), nullable=False, default=""))
    results: str = Field(default="", sa_column=Column(Text(), nullable=False, default=""))
    links: str = Field(default="", sa_column=Column(Text(), nullable=False, default=""))
    when_needed: str = Field(default="", sa_column=Column(Text(), nullable=False, default=""))
    status: TokenRequestStatus = Field(default=TokenRequestStatus.waiting,
                                       sa_column=_state(TokenRequestStatus, "status"))
    granted: int | None = Field(default=None, sa_column=Column(BigInteger(), nullable=True))  # the approval's Grant
    note: str = Field(default="", sa_column=Column(String(200), nullable=False, default=""))  # the admin's
    decided_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))
    decided_by: str = Field(default="", sa_column=Column(String(200), nullable=False, default=""))


# The spec: one request waiting at a time. The index catches two sent at once.
_WAITING = text("status = 'waiting'")
Index("uq_token_requests_user_id_waiting", table_of(TokenRequest).c.user_id, unique=True,
      postgresql_where=_WAITING, sqlite_where=_WAITING)
