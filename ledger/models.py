"""The ledger's tables. Every table of the project is defined in `ledger/`.

States are VARCHARs with CHECK constraints rather than native enum types:
adding a state later is then the same plain migration on both backends.
"""
from __future__ import annotations

import enum
import uuid
from datetime import datetime

from sqlalchemy import BigInteger, Column, Enum, ForeignKey, Index, String, Uuid, func, text
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


class User(SQLModel, table=True):
    __tablename__ = "users"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    name: str = Field(sa_column=Column(String(200), nullable=False, unique=True))
    standing: Standing = Field(
        default=Standing.active, sa_column=_state(Standing, "standing")
    )
    # None: the platform's default allowance (the spec's 5,000,000 a month).
    monthly_allowance: int | None = Field(default=None, sa_column=Column(BigInteger(), nullable=True))
    created_at: datetime = Field(default_factory=utcnow, sa_column=_created_at())


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
