"""The App's token requests (spec: "Ask for more tokens"): what a User asked for, and the admin's decision."""
from __future__ import annotations

import enum
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, ForeignKey, Index, String, Text, Uuid, text
from sqlmodel import Field, SQLModel

from ledger.coltypes import UtcDateTime
from ledger.ids import uuid7
from ledger.models import _created_at, _state

PROJECT_MAX = 200


class TokenRequestStatus(str, enum.Enum):
    waiting = "waiting"
    approved = "approved"
    rejected = "rejected"


class TokenRequest(SQLModel, table=True):
    __tablename__ = "token_requests"

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
Index("uq_token_requests_user_id_waiting", TokenRequest.__table__.c.user_id, unique=True,
      postgresql_where=_WAITING, sqlite_where=_WAITING)
