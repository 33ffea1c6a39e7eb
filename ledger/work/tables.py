"""The tables of background work: the Runner's queues and work rows, harvests, Looms
and their Nodes, and the Playground's Runs.
"""
from __future__ import annotations

import enum
import uuid
from datetime import datetime
from typing import ClassVar

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Enum,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    Uuid,
    false,
)
from sqlmodel import Field, SQLModel

from ledger.store.coltypes import UtcDateTime, utcnow
from ledger.store.columns import _created_at, _state, table_of
from ledger.store.ids import uuid7

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

    __tablename__: ClassVar[str] = "work_queues"

    kind: WorkKind = Field(sa_column=Column(Enum(WorkKind, name="kind", native_enum=False, create_constraint=True,
                                                 length=16, values_callable=lambda m: [x.value for x in m]),
                                            primary_key=True))
    max_running: int = Field(sa_column=Column(Integer(), nullable=False))
    # The claim's order: a User with nothing running first (Jobs), else the oldest first.
    fair_to_users: bool = Field(default=False, sa_column=Column(Boolean(), nullable=False, server_default=false()))
    # The last time a Runner of this kind checked in (GET /health shows it).
    polled_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))
    # What a row whose Runner died (its lease lapsed) becomes: back to `queued` to run again
    # (Jobs, Nodes, harvests), or `failed`, keeping what it wrote (a Playground Run). Its Hold
    # is released either way (spec: "When the API restarts").
    fail_on_lost_lease: bool = Field(default=False, sa_column=Column(Boolean(), nullable=False,
                                                                     server_default=false()))


class Work(SQLModel, table=True):
    """One piece of background work (a Job: one Completion request).

    A queue row: a Runner claims a `queued` row with a lease it renews while
    the work runs; a row whose lease expired goes back to `queued` and its
    Hold is released. The result is written in the same transaction that
    ends the Hold, so a request is charged once and keeps its answer.
    """

    __tablename__: ClassVar[str] = "work"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    kind: WorkKind = Field(sa_column=_state(WorkKind, "kind"))
    user_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("users.id"), nullable=False))
    # The API key that made it; None for the App's own work (a Playground Run), which uses no key,
    # so that a paused or revoked key does not touch it.
    key_id: uuid.UUID | None = Field(default=None, sa_column=Column(Uuid(), ForeignKey("api_keys.id"), nullable=True))
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
_work = table_of(Work).c
Index("ix_work_kind_status_created_at", _work.kind, _work.status, _work.created_at)
Index("ix_work_user_id_kind_status", _work.user_id, _work.kind, _work.status)
Index("ix_work_key_id_kind_status", _work.key_id, _work.kind, _work.status)
Index("ix_work_status_lease_until", _work.status, _work.lease_until)


class Harvest(SQLModel, table=True):
    """What a harvest adds to its `work` row (kind `harvest`): its size, its
    Hold's worth, the Ray run the Runner follows, and how far that run got.

    The row's status is the harvest's (queued is `pending`, succeeded is
    `done`); its result body is the run's result, or why it failed.
    """

    __tablename__: ClassVar[str] = "harvests"

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

    __tablename__: ClassVar[str] = "looms"

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


Index("ix_looms_user_id_deleted_at", table_of(Loom).c.user_id, table_of(Loom).c.deleted_at)


class LoomNode(SQLModel, table=True):
    """One Node of a Loom: its own text, and how it grew.

    A Node of a Branch has a `work` row (kind `node`) that the Runner runs; the
    Node's own columns are what a read shows, written while it streams. When
    its work row went back to `queued` (a restart), a read shows it queued and
    without text until it runs again (`ledger.work.looms.effective`).
    """

    __tablename__: ClassVar[str] = "loom_nodes"

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


Index("ix_loom_nodes_loom_id", table_of(LoomNode).c.loom_id)
Index("ix_loom_nodes_work_id", table_of(LoomNode).c.work_id)


# -- The Playground's Runs -------------------------------------------------------------------------


class RunStatus(str, enum.Enum):
    """A Run's status, in the words of the Usage page's Completions."""

    queued = "queued"
    running = "running"
    completed = "completed"
    failed = "failed"
    stopped = "stopped"


RUN_GROWING = (RunStatus.queued, RunStatus.running)


class PlaygroundRun(SQLModel, table=True):
    """One Completion that a User started in the App's Playground (spec: "Use the Playground").

    Its `work` row (kind `run`, no API key) is what the Runner runs; the Run's own columns are
    what a read shows, written while it streams. When its work row went back to `queued` (a
    planned restart), a read shows it queued without text until it runs again from the beginning
    (`ledger.work.runs.effective`). A deleted Run is gone for its User at once (`deleted_at`)
    and erased 14 days later by the Runner's housekeeping.
    """

    __tablename__: ClassVar[str] = "playground_runs"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    user_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("users.id"), nullable=False))
    # 1, 2, 3... per User in the order started, never reused (`PlaygroundCounter`).
    number: int = Field(sa_column=Column(Integer(), nullable=False))
    # The Runs of one Run all share it; None for a Run started alone.
    group_id: uuid.UUID | None = Field(default=None, sa_column=Column(Uuid(), nullable=True))
    work_id: uuid.UUID = Field(sa_column=Column(Uuid(), nullable=False))
    # The `model` of the request as it came, and the served name that its Completion answers with.
    model: str = Field(sa_column=Column(String(200), nullable=False))
    served_model: str = Field(default="", sa_column=Column(String(200), nullable=False, default=""))
    # The exact body of POST /v1/completions that the Run runs, as JSON text.
    request: str = Field(sa_column=Column(Text(), nullable=False))
    # The seed it samples with: the request's, or one chosen at its start when the request has none,
    # so that Restore brings the Run back with its seed (spec: "Find your Runs again").
    seed: int | None = Field(default=None, sa_column=Column(BigInteger(), nullable=True))
    status: RunStatus = Field(default=RunStatus.queued, sa_column=_state(RunStatus, "status"))
    # The Completion as it grows: its id, its choices in the API's shape (JSON list), its usage
    # (JSON, once Inference reported it) and the error object of a failed Run (JSON).
    completion_id: str = Field(default="", sa_column=Column(String(64), nullable=False, default=""))
    choices: str = Field(default="[]", sa_column=Column(Text(), nullable=False, default="[]"))
    usage: str | None = Field(default=None, sa_column=Column(Text(), nullable=True))
    error: str | None = Field(default=None, sa_column=Column(Text(), nullable=True))
    # The attempt of the work row that writes the text: a cut attempt's late writes are dropped.
    attempt: int = Field(default=0, sa_column=Column(Integer(), nullable=False, default=0))
    # Prompt and generated tokens so far: what a stopped Run pays, as a cut stream does.
    used_tokens: int = Field(default=0, sa_column=Column(Integer(), nullable=False, default=0))
    created_at: datetime = Field(default_factory=utcnow, sa_column=_created_at())
    started_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))
    finished_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))
    # Until when its Activations are kept (7 days after the Run ended); None: it read none.
    activations_expire_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))
    deleted_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))


_runs = table_of(PlaygroundRun).c
Index("uq_playground_runs_user_id_number", _runs.user_id, _runs.number, unique=True)
Index("ix_playground_runs_group_id", _runs.group_id)
Index("ix_playground_runs_work_id", _runs.work_id)
Index("ix_playground_runs_deleted_at", _runs.deleted_at)


class PlaygroundActivations(SQLModel, table=True):
    """A Run's Activations, as the API answers them (the spec's encoding, "Decode the tensor"):
    apart from the Run's row, so that a list of Runs never reads them."""

    __tablename__: ClassVar[str] = "playground_activations"

    run_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("playground_runs.id"), primary_key=True))
    data: str = Field(sa_column=Column(Text(), nullable=False))  # JSON: {"residual_stream": {...}}


class PlaygroundCounter(SQLModel, table=True):
    """The last number given to one User's Runs: taken under this row's lock, so two starts at once
    never share a number, and kept when Runs are deleted or erased, so none is reused."""

    __tablename__: ClassVar[str] = "playground_counters"

    user_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("users.id"), primary_key=True))
    last_number: int = Field(default=0, sa_column=Column(Integer(), nullable=False, default=0))
