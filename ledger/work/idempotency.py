"""Idempotency records: a request sent again with its `Idempotency-Key` runs once.

Stripe-like, as spec/docs.md "Send a request again safely" describes. Each
User has one set of keys across all their API keys. A record is `running`
while its first request runs, then `answered` (the answer to replay) or
`no_answer` (a stream: it ran, and cannot be sent again). A request that
failed before it was charged deletes its record, so the key is free again.
A record lives 24 hours; after that the key counts as new.

Every function commits itself. `begin` is safe under concurrency on both
backends: the unique (user_id, key) index picks the one request that runs.
Each transaction writes first, so SQLite takes its write lock before it
reads anything and never has to upgrade a read snapshot.
"""
from __future__ import annotations

import enum
import hashlib
import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar, Union

from sqlalchemy import (
    Column, ForeignKey, Integer, String, Text, UniqueConstraint, Uuid, and_, delete, insert, or_, update,
)
from sqlalchemy.exc import IntegrityError
from sqlmodel import Field, SQLModel, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.store.coltypes import UtcDateTime, utcnow
from ledger.store.ids import uuid7
from ledger.store.columns import _state, table_of

KEY_MAX = 255
ROUTE_MAX = 255
KEPT_FOR = timedelta(hours=24)  # docs.md "Limits" → "Kept data"
# A claim fails only when a record exists; it can vanish (released, expired)
# before we read it, and then we claim again. More rounds than this is a bug.
CLAIM_ROUNDS = 5


class RecordState(str, enum.Enum):
    running = "running"
    answered = "answered"
    no_answer = "no_answer"


class IdempotencyRecord(SQLModel, table=True):
    __tablename__: ClassVar[str] = "idempotency_records"
    # The one set of keys of each User; also the lookup of every `begin`.
    __table_args__ = (UniqueConstraint("user_id", "key"),)

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    user_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("users.id"), nullable=False))
    key: str = Field(sa_column=Column(String(KEY_MAX), nullable=False))
    # Method and path, e.g. "POST /v1/completions": the same key on another route conflicts.
    route: str = Field(sa_column=Column(String(ROUTE_MAX), nullable=False))
    request_hash: str = Field(sa_column=Column(String(64), nullable=False))
    state: RecordState = Field(default=RecordState.running, sa_column=_state(RecordState, "state"))
    response_status: int | None = Field(default=None, sa_column=Column(Integer(), nullable=True))
    response_body: str | None = Field(default=None, sa_column=Column(Text(), nullable=True))
    response_headers: str | None = Field(default=None, sa_column=Column(Text(), nullable=True))  # JSON
    created_at: datetime = Field(default_factory=utcnow, sa_column=Column(UtcDateTime(), nullable=False))
    expires_at: datetime = Field(sa_column=Column(UtcDateTime(), nullable=False, index=True))


# Outcomes of `begin` ----------------------------------------------------------
@dataclass(frozen=True)
class Started:
    """The caller owns the key: run the request, then finish, stream or release it."""

    record_id: uuid.UUID


@dataclass(frozen=True)
class Replay:
    """The same request was answered: send this answer again, as it was."""

    status: int
    body: str
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class InProgress:
    """The same request still runs (409 running)."""


@dataclass(frozen=True)
class NoAnswer:
    """The same request ran as a stream, which cannot be sent again (409 no_answer)."""


@dataclass(frozen=True)
class Conflict:
    """The key came before with another request or on another route (409 idempotency_conflict)."""

    other_route: bool = False


Outcome = Union[Started, Replay, InProgress, NoAnswer, Conflict]


# A request whose process died (kill -9, a lost node) never ends its record.
RUNNING_ABANDONED_AFTER = timedelta(minutes=30)


def request_hash(body: Any) -> str:
    """sha256 of the body as canonical JSON, so key order and spacing do not count."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


# begin --------------------------------------------------------------------------
async def begin(session: AsyncSession, user_id: uuid.UUID, key: str, route: str, request_hash: str,
                now: datetime | None = None) -> Outcome:
    """Claim `key` for this request, or say what the request that has it came to."""
    now = now or utcnow()
    record = IdempotencyRecord(user_id=user_id, key=key, route=route, request_hash=request_hash,
                               created_at=now, expires_at=now + KEPT_FOR)
    for _ in range(CLAIM_ROUNDS):
        if await _claim(session, record, now):
            return Started(record.id)
        existing = await _live_record(session, user_id, key, now)
        if existing is not None:
            return _outcome_of(existing, route, request_hash)
    raise RuntimeError(f"could not claim the Idempotency-Key of user {user_id} in {CLAIM_ROUNDS} rounds")


async def _claim(session: AsyncSession, record: IdempotencyRecord, now: datetime) -> bool:
    """Insert the record, replacing an expired one; False when a live one has the key."""
    table = table_of(IdempotencyRecord)
    # Expired, or `running` so long that its process must have died with it
    # (no request waits past the line and the 14-minute wait to Inference).
    expired = delete(table).where(table.c.user_id == record.user_id, table.c.key == record.key,
                                  or_(table.c.expires_at <= now,
                                      and_(table.c.state == RecordState.running.value,
                                           table.c.created_at <= now - RUNNING_ABANDONED_AFTER)))
    values = {column.name: getattr(record, column.name) for column in table.columns}
    try:
        await session.exec(expired)
        await session.exec(insert(table).values(values))
        await session.commit()
    except IntegrityError:
        # PostgreSQL waits here for a concurrent claim to commit, then refuses ours.
        await session.rollback()
        return False
    return True


async def _live_record(session: AsyncSession, user_id: uuid.UUID, key: str,
                       now: datetime) -> IdempotencyRecord | None:
    query = select(IdempotencyRecord).where(IdempotencyRecord.user_id == user_id,
                                            IdempotencyRecord.key == key)
    record = (await session.exec(query)).one_or_none()
    await session.commit()  # end the read: no snapshot outlives the request's first step
    # Gone, expired or abandoned since our claim: the next claim takes (or replaces) it.
    if record is None or record.expires_at <= now:
        return None
    abandoned = record.state is RecordState.running and record.created_at <= now - RUNNING_ABANDONED_AFTER
    return None if abandoned else record


def _outcome_of(record: IdempotencyRecord, route: str, request_hash: str) -> Outcome:
    # Another request with the key conflicts whatever became of the first one.
    if record.route != route:
        return Conflict(other_route=True)
    if record.request_hash != request_hash:
        return Conflict()
    if record.state is RecordState.running:
        return InProgress()
    if record.state is RecordState.no_answer:
        return NoAnswer()
    headers = json.loads(record.response_headers) if record.response_headers else {}
    return Replay(record.response_status or 200, record.response_body or "", headers)


# The end of the request that owns the key ---------------------------------------
async def finish(session: AsyncSession, record_id: uuid.UUID, status: int, body: str,
                 headers: dict[str, str] | None = None) -> bool:
    """Keep the answer to replay; False when the record was not running any more."""
    return await _end_running(session, record_id, state=RecordState.answered, response_status=status,
                              response_body=body, response_headers=json.dumps(headers or {}))


async def finish_without_answer(session: AsyncSession, record_id: uuid.UUID) -> bool:
    """A stream ran: a repeat gets 409 no_answer, and nothing runs or is charged again."""
    return await _end_running(session, record_id, state=RecordState.no_answer)


async def release(session: AsyncSession, record_id: uuid.UUID) -> bool:
    """Free the key of a request that failed before it was charged: the same request may run."""
    table = table_of(IdempotencyRecord)
    # Only a running record: a late release must never erase an answer.
    statement = delete(table).where(table.c.id == record_id, table.c.state == RecordState.running)
    result = await session.exec(statement)
    await session.commit()
    return result.rowcount == 1


async def _end_running(session: AsyncSession, record_id: uuid.UUID, **values: Any) -> bool:
    table = table_of(IdempotencyRecord)
    statement = (update(table)
                 .where(table.c.id == record_id, table.c.state == RecordState.running)
                 .values(**values))
    result = await session.exec(statement)
    await session.commit()
    return result.rowcount == 1


async def purge_expired(session: AsyncSession, now: datetime | None = None) -> int:
    """Delete the records past their 24 hours; returns how many."""
    table = table_of(IdempotencyRecord)
    result = await session.exec(delete(table).where(table.c.expires_at <= (now or utcnow())))
    await session.commit()
    return result.rowcount
