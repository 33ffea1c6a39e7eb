"""The ledger's tables. Every table of the project is defined in `ledger/`.

States are VARCHARs with CHECK constraints rather than native enum types:
adding a state later is then the same plain migration on both backends.
"""
from __future__ import annotations

import enum
import uuid
from datetime import datetime

from sqlalchemy import BigInteger, Boolean, Column, Enum, Float, ForeignKey, Index, Integer, String, Text, Uuid, false, func, text
from sqlmodel import Field, SQLModel

from ledger.coltypes import UtcDateTime, utcnow
from ledger.ids import uuid7

# Stable constraint names, so migrations (and SQLite's batch mode) can name
# the constraints they change.
SQLModel.metadata.naming_convention = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

KEY_NAME_MAX = 32
KEY_PREFIX_LEN = 11  # "sk-acs-" and the next 4 characters, as the App shows a key.


class Standing(str, enum.Enum):
    active = "active"
    suspended = "suspended"


class KeyStatus(str, enum.Enum):
    active = "active"
    paused = "paused"
    revoked = "revoked"


def _state(kind: type[enum.Enum], name: str) -> Column:
    """A VARCHAR with a CHECK of the enum's values, loaded as enum members."""
    sa_type = Enum(
        kind,
        name=name,
        native_enum=False,
        create_constraint=True,
        length=16,
        values_callable=lambda members: [member.value for member in members],
    )
    return Column(sa_type, nullable=False, default=next(iter(kind)))


def _created_at() -> Column:
    return Column(UtcDateTime(), nullable=False, default=utcnow)


class Role(str, enum.Enum):
    user = "user"
    admin = "admin"  # the admin routes and the App's Admin page


class User(SQLModel, table=True):
    __tablename__ = "users"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    name: str = Field(sa_column=Column(String(200), nullable=False, unique=True))
    standing: Standing = Field(
        default=Standing.active, sa_column=_state(Standing, "standing")
    )
    # None: the platform's default allowance (the spec's 5,000,000 a month).
    monthly_allowance: int | None = Field(default=None, sa_column=Column(BigInteger(), nullable=True))
    # Harvests that each of the User's keys may start in a UTC month; None: the spec's 200.
    harvest_quota: int | None = Field(default=None, sa_column=Column(Integer(), nullable=True))
    created_at: datetime = Field(default_factory=utcnow, sa_column=_created_at())
    role: Role = Field(default=Role.user, sa_column=Column(
        Enum(Role, name="role", native_enum=False, create_constraint=True, length=16,
             values_callable=lambda members: [member.value for member in members]),
        nullable=False, server_default=Role.user.value))
    # The App's sign-in (ledger/access_models.py has the rest): lowercase; None for a User made before
    # the App, or by the command line without one. The password is kept as its argon2id hash only.
    email: str | None = Field(default=None, sa_column=Column(String(320), nullable=True, unique=True))
    password_hash: str | None = Field(default=None, sa_column=Column(String(200), nullable=True))
    password_set_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))


class UserTag(SQLModel, table=True):
    """A tag that an admin puts on Users to find a group again: lowercase letters, digits, dashes, <= 32."""

    __tablename__ = "user_tags"

    user_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("users.id"), primary_key=True))
    tag: str = Field(sa_column=Column(String(32), primary_key=True))


class ApiKey(SQLModel, table=True):
    __tablename__ = "api_keys"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    user_id: uuid.UUID = Field(
        sa_column=Column(Uuid(), ForeignKey("users.id"), nullable=False, index=True)
    )
    name: str = Field(sa_column=Column(String(KEY_NAME_MAX), nullable=False))
    # sha256 hex of the whole key: the key itself is never stored.
    key_hash: str = Field(sa_column=Column(String(64), nullable=False, unique=True))
    prefix: str = Field(sa_column=Column(String(KEY_PREFIX_LEN), nullable=False))
    status: KeyStatus = Field(
        default=KeyStatus.active, sa_column=_state(KeyStatus, "status")
    )
    created_at: datetime = Field(default_factory=utcnow, sa_column=_created_at())
    last_used_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))


# The spec: no two live keys of a User share a name, whatever the case; a
# revoked key's name is free again.
_LIVE = text("status <> 'revoked'")
Index(
    "uq_api_keys_user_id_live_name",
    ApiKey.__table__.c.user_id,
    func.lower(ApiKey.__table__.c.name),
    unique=True,
    postgresql_where=_LIVE,
    sqlite_where=_LIVE,
)


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

    __tablename__ = "budgets"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    user_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("users.id"), nullable=False, index=True))
    key_id: uuid.UUID | None = Field(
        default=None, sa_column=Column(Uuid(), ForeignKey("api_keys.id"), nullable=True, unique=True)
    )
    # Tokens left. Holds take from it; it never goes below 0.
    tokens: int = Field(default=0, sa_column=Column(BigInteger(), nullable=False, default=0))


class MonthlyUsage(SQLModel, table=True):
    """Tokens of one User's allowance taken in one UTC month (Holds included)."""

    __tablename__ = "monthly_usage"

    user_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("users.id"), primary_key=True))
    month: str = Field(sa_column=Column(String(7), primary_key=True))  # "2026-11"
    used: int = Field(default=0, sa_column=Column(BigInteger(), nullable=False, default=0))


class Grant(SQLModel, table=True):
    __tablename__ = "grants"

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

    __tablename__ = "holds"

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


Index("ix_holds_state_lease_until", Hold.__table__.c.state, Hold.__table__.c.lease_until)
Index("ix_holds_user_id_created_at", Hold.__table__.c.user_id, Hold.__table__.c.created_at)
Index("ix_holds_key_id_month", Hold.__table__.c.key_id, Hold.__table__.c.month)


class SpendStop(SQLModel, table=True):
    """The spend stop: one row; while `locked`, new GPU work gets 429 spend_cap."""

    __tablename__ = "spend_stop"

    id: int = Field(default=1, sa_column=Column(BigInteger(), primary_key=True))
    locked: bool = Field(default=False, nullable=False)
    reason: str = Field(default="", sa_column=Column(String(200), nullable=False, default=""))
    changed_at: datetime = Field(default_factory=utcnow, sa_column=_created_at())

# One Budget of the User itself (key_id NULL) per User.
_USER_BUDGET = text("key_id IS NULL")
Index("uq_budgets_user_id_own", Budget.__table__.c.user_id, unique=True,
      postgresql_where=_USER_BUDGET, sqlite_where=_USER_BUDGET)


# -- Background work: the Runner's queues --------------------------------------


class WorkKind(str, enum.Enum):
    """A kind of background work; each has its queue row and its handler."""

    job = "job"
    node = "node"  # a Loom Node
    harvest = "harvest"
    run = "run"  # a Playground Run


class WorkStatus(str, enum.Enum):
    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"


ENDED = (WorkStatus.succeeded, WorkStatus.failed, WorkStatus.cancelled)


class WorkQueue(SQLModel, table=True):
    """One row per kind of work: how many may run at once, and the row a claim
    locks, so that Runners on several replicas never start one too many."""

    __tablename__ = "work_queues"

    kind: WorkKind = Field(sa_column=Column(Enum(WorkKind, name="kind", native_enum=False, create_constraint=True,
                                                 length=16, values_callable=lambda m: [x.value for x in m]),
                                            primary_key=True))
    max_running: int = Field(sa_column=Column(Integer(), nullable=False))
    # The claim's order: a User with nothing running first (Jobs), else the oldest first.
    fair_to_users: bool = Field(default=False, sa_column=Column(Boolean(), nullable=False, server_default=false()))
    # The last time a Runner of this kind checked in (GET /health shows it).
    polled_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))


class Work(SQLModel, table=True):
    """One piece of background work (a Job: one Completion request).

    A queue row: a Runner claims a `queued` row with a lease it renews while
    the work runs; a row whose lease expired goes back to `queued` and its
    Hold is released. The result is written in the same transaction that
    ends the Hold, so a request is charged once and keeps its answer.
    """

    __tablename__ = "work"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    kind: WorkKind = Field(sa_column=_state(WorkKind, "kind"))
    user_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("users.id"), nullable=False))
    key_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("api_keys.id"), nullable=False))
    # The `model` of the request as it came (an id or an alias), as the Job shows it,
    # and the catalog id it resolved to: a Runner claims only work of models it serves.
    model: str = Field(sa_column=Column(String(200), nullable=False))
    model_id: str = Field(sa_column=Column(String(100), nullable=False))
    status: WorkStatus = Field(default=WorkStatus.queued, sa_column=_state(WorkStatus, "status"))
    # The request body to run, as JSON text.
    request: str = Field(sa_column=Column(Text(), nullable=False))
    request_id: str = Field(sa_column=Column(String(64), nullable=False))
    cancel_requested: bool = Field(default=False, nullable=False)
    created_at: datetime = Field(default_factory=utcnow, sa_column=_created_at())
    started_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))
    finished_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))
    lease_owner: str = Field(default="", sa_column=Column(String(64), nullable=False, default=""))
    lease_until: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))
    attempts: int = Field(default=0, sa_column=Column(Integer(), nullable=False, default=0))
    # The Hold of the attempt that runs now.
    hold_id: uuid.UUID | None = Field(default=None, sa_column=Column(Uuid(), nullable=True))
    result_status: int | None = Field(default=None, sa_column=Column(Integer(), nullable=True))
    result_body: str | None = Field(default=None, sa_column=Column(Text(), nullable=True))
    result_expires_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))


# The claim: the oldest queued work of a kind. The caps: counts by key, by User, by status.
Index("ix_work_kind_status_created_at", Work.__table__.c.kind, Work.__table__.c.status, Work.__table__.c.created_at)
Index("ix_work_user_id_kind_status", Work.__table__.c.user_id, Work.__table__.c.kind, Work.__table__.c.status)
Index("ix_work_key_id_kind_status", Work.__table__.c.key_id, Work.__table__.c.kind, Work.__table__.c.status)
Index("ix_work_status_lease_until", Work.__table__.c.status, Work.__table__.c.lease_until)


class Harvest(SQLModel, table=True):
    """What a harvest adds to its `work` row (kind `harvest`): its size, its
    Hold's worth, the Ray run the Runner follows, and how far that run got.

    The row's status is the harvest's (queued is `pending`, succeeded is
    `done`); its result body is the run's result, or why it failed.
    """

    __tablename__ = "harvests"

    work_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("work.id"), primary_key=True))
    model_class: str = Field(sa_column=Column(String(16), nullable=False))  # small | large (the caps)
    n_prompts: int = Field(sa_column=Column(Integer(), nullable=False))
    reserved_tokens: int = Field(sa_column=Column(BigInteger(), nullable=False))
    layers: str = Field(sa_column=Column(Text(), nullable=False))  # JSON list, ascending
    # The name of the run's actor in the Ray cluster: a restarted Runner follows it.
    run_name: str = Field(default="", sa_column=Column(String(100), nullable=False, default=""))
    # When the GPU run started (the spec's started_at); None: it never started.
    gpu_started_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))
    prompts_done: int = Field(default=0, sa_column=Column(Integer(), nullable=False, default=0))


class NodeStatus(str, enum.Enum):
    queued = "queued"
    running = "running"
    completed = "completed"
    failed = "failed"
    cancelled = "cancelled"


GROWING = (NodeStatus.queued, NodeStatus.running)


class Loom(SQLModel, table=True):
    """A tree of Nodes that a User grows from one prompt (spec: "Grow a Loom with the API").

    A deleted Loom is gone for its User at once (`deleted_at`) and erased 14
    days later by the Runner's housekeeping.
    """

    __tablename__ = "looms"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    user_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("users.id"), nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_column=_created_at())
    # The last change that moves it in the list: a Branch, an edit, a split, a sibling,
    # a new root, a deleted Node, a rename. A pin does not.
    updated_at: datetime = Field(default_factory=utcnow, sa_column=_created_at())
    title: str = Field(default="", sa_column=Column(String(120), nullable=False, default=""))
    pinned_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))
    # The last Branch's model (as it was asked for) and settings, for the export file.
    model: str | None = Field(default=None, sa_column=Column(String(200), nullable=True))
    last_generation_config: str | None = Field(default=None, sa_column=Column(Text(), nullable=True))
    deleted_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))


Index("ix_looms_user_id_deleted_at", Loom.__table__.c.user_id, Loom.__table__.c.deleted_at)


class LoomNode(SQLModel, table=True):
    """One Node of a Loom: its own text, and how it grew.

    A Node of a Branch has a `work` row (kind `node`) that the Runner runs; the
    Node's own columns are what a read shows, written while it streams. When
    its work row went back to `queued` (a restart), a read shows it queued and
    without text until it runs again (`ledger.looms.effective`).
    """

    __tablename__ = "loom_nodes"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    loom_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("looms.id"), nullable=False))
    parent_id: uuid.UUID | None = Field(default=None, sa_column=Column(Uuid(), nullable=True))
    # Its place among its siblings: siblings come in the order they were made.
    position: int = Field(default=0, sa_column=Column(Integer(), nullable=False, default=0))
    status: NodeStatus = Field(default=NodeStatus.completed, sa_column=_state(NodeStatus, "status"))
    text: str = Field(default="", sa_column=Column(Text(), nullable=False, default=""))
    logprobs: str | None = Field(default=None, sa_column=Column(Text(), nullable=True))  # JSON, the spec's shape
    error: str | None = Field(default=None, sa_column=Column(Text(), nullable=True))  # JSON error object
    request: str | None = Field(default=None, sa_column=Column(Text(), nullable=True))  # JSON NodeRequest
    work_id: uuid.UUID | None = Field(default=None, sa_column=Column(Uuid(), nullable=True))
    # The attempt of the work row that writes the text: a cut attempt's late writes are dropped.
    attempt: int = Field(default=0, sa_column=Column(Integer(), nullable=False, default=0))
    # Prompt and generated tokens so far: what a stopped Node pays, as a cut stream does.
    used_tokens: int = Field(default=0, sa_column=Column(Integer(), nullable=False, default=0))
    # The old platform's marks (export version 2).
    text_modified: bool = Field(default=False, sa_column=Column(Boolean(), nullable=False, server_default=false()))
    context_modified: bool = Field(default=False, sa_column=Column(Boolean(), nullable=False, server_default=false()))
    slice_offset: int | None = Field(default=None, sa_column=Column(Integer(), nullable=True))
    slice_end: int | None = Field(default=None, sa_column=Column(Integer(), nullable=True))
    created_at: datetime = Field(default_factory=utcnow, sa_column=_created_at())
    deleted_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))


Index("ix_loom_nodes_loom_id", LoomNode.__table__.c.loom_id)
Index("ix_loom_nodes_work_id", LoomNode.__table__.c.work_id)


# -- Operating the cluster: warm windows, the GPU spend, the stop's history ---------------------


class WarmWindow(SQLModel, table=True):
    """A time when a model keeps a floor of one replica (spec: "Keep a model Warm").

    Weekly: on `days` (ISO weekday numbers 1-7, comma-separated) from `start_minute`
    to `end_minute` of the day in `time_zone`; one that ends at or before its start
    ends the next day. "Warm now": `ends_at` set, the days unused.
    """

    __tablename__ = "warm_windows"

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

    __tablename__ = "spend_samples"

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

    __tablename__ = "spend_stop_changes"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    at: datetime = Field(default_factory=utcnow, sa_column=_created_at())
    kind: StopChangeKind = Field(sa_column=_state(StopChangeKind, "kind"))
    by: str = Field(default="", sa_column=Column(String(200), nullable=False, default=""))
    reason: str = Field(default="", sa_column=Column(String(200), nullable=False, default=""))
    usd: float | None = Field(default=None, sa_column=Column(Float(), nullable=True))  # the amount a pause met


class BudgetRefusal(SQLModel, table=True):
    """A request that the tokens could not hold (a 429 budget_exceeded): the Analytics' Budget tab counts them."""

    __tablename__ = "budget_refusals"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    at: datetime = Field(default_factory=utcnow, sa_column=Column(UtcDateTime(), nullable=False, index=True))
    user_id: uuid.UUID = Field(sa_column=Column(Uuid(), nullable=False))
    key_id: uuid.UUID | None = Field(default=None, sa_column=Column(Uuid(), nullable=True))
    model: str = Field(sa_column=Column(String(100), nullable=False))
    source: str = Field(sa_column=Column(String(16), nullable=False))
    tokens: int = Field(sa_column=Column(BigInteger(), nullable=False))  # what the request asked to hold


# The App's access tables live in their own module; importing them here puts them on the
# metadata for everyone who imports the ledger's tables (migrations, the tests' emptying).
import ledger.access_models  # noqa: E402,F401
import ledger.token_request_models  # noqa: E402,F401  (the App's token requests, the same way)
