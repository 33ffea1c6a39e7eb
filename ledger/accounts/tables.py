"""The tables of accounts and access: Users, their tags and API keys; the App's
Applications, Invites, password links, sessions, sign-in tries and mail outbox.
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
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    Uuid,
    func,
    text,
)
from sqlmodel import Field, SQLModel

from ledger.store.coltypes import UtcDateTime, utcnow
from ledger.store.columns import _created_at, _state, table_of
from ledger.store.ids import uuid7

KEY_NAME_MAX = 32
KEY_PREFIX_LEN = 11  # "sk-acs-" and the next 4 characters, as the App shows a key.
ORGANIZATION_MAX = 200  # as long as an Application's answer
DISCORD_HANDLE_MAX = 100


class Standing(str, enum.Enum):
    active = "active"
    suspended = "suspended"


class KeyStatus(str, enum.Enum):
    active = "active"
    paused = "paused"
    revoked = "revoked"


class Role(str, enum.Enum):
    user = "user"
    admin = "admin"  # the admin routes and the App's Admin page


class User(SQLModel, table=True):
    __tablename__: ClassVar[str] = "users"

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
    # The App's sign-in (ledger/accounts/tables.py has the rest): lowercase; None for a User made before
    # the App, or by the command line without one. The password is kept as its argon2id hash only.
    email: str | None = Field(default=None, sa_column=Column(String(320), nullable=True, unique=True))
    password_hash: str | None = Field(default=None, sa_column=Column(String(200), nullable=True))
    password_set_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))
    # What an admin types in Details on the User's page; None: the Users tab shows the Application's answer.
    organization: str | None = Field(default=None, sa_column=Column(String(ORGANIZATION_MAX), nullable=True))
    discord_handle: str | None = Field(default=None, sa_column=Column(String(DISCORD_HANDLE_MAX), nullable=True))
    # Set by an admin's Delete: the User keeps its rows for the ledger, but is suspended, its keys revoked and its
    # password gone for good (domain/operations/users.py, delete_user). A deleted User is never changed again.
    deleted_at: datetime | None = Field(default=None, sa_column=Column(UtcDateTime(), nullable=True))


class UserTag(SQLModel, table=True):
    """A tag that an admin puts on Users to find a group again: lowercase letters, digits, dashes, <= 32."""

    __tablename__: ClassVar[str] = "user_tags"

    user_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("users.id"), primary_key=True))
    tag: str = Field(sa_column=Column(String(32), primary_key=True))


class ApiKey(SQLModel, table=True):
    __tablename__: ClassVar[str] = "api_keys"

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
    table_of(ApiKey).c.user_id,
    func.lower(table_of(ApiKey).c.name),
    unique=True,
    postgresql_where=_LIVE,
    sqlite_where=_LIVE,
)


# -- (from ledger/accounts/tables.py)


import enum
import uuid
from datetime import datetime

from sqlalchemy import BigInteger, Column, ForeignKey, Index, Integer, String, Text, Uuid
from sqlmodel import Field, SQLModel

from ledger.store.coltypes import UtcDateTime, utcnow
from ledger.store.columns import _created_at, _state
from ledger.store.ids import uuid7

EMAIL_MAX = 320


class ApplicationStatus(str, enum.Enum):
    waiting = "waiting"
    approved = "approved"
    rejected = "rejected"


class LinkPurpose(str, enum.Enum):
    approval = "approval"  # the approval email's link (7 days)
    set = "set"  # asked for by a User without a password, or made by an Invite
    reset = "reset"  # asked for by a User with a password (1 hour)


def _when(nullable: bool = True, index: bool = False) -> Column:
    return Column(UtcDateTime(), nullable=nullable, index=index)


class Application(SQLModel, table=True):
    """What someone sent with the Apply form (or an Invite's form), and the admin's decision."""

    __tablename__: ClassVar[str] = "applications"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    email: str = Field(sa_column=Column(String(EMAIL_MAX), nullable=False, index=True))
    name: str = Field(sa_column=Column(String(200), nullable=False))
    organization: str = Field(sa_column=Column(String(200), nullable=False))
    planned_usage: str = Field(sa_column=Column(Text(), nullable=False))
    how_you_heard: str = Field(default="", sa_column=Column(Text(), nullable=False, default=""))
    links: str = Field(default="", sa_column=Column(Text(), nullable=False, default=""))
    expected_tokens: str = Field(default="", sa_column=Column(String(100), nullable=False, default=""))
    status: ApplicationStatus = Field(default=ApplicationStatus.waiting,
                                      sa_column=_state(ApplicationStatus, "application_status"))
    note: str = Field(default="", sa_column=Column(Text(), nullable=False, default=""))
    user_id: uuid.UUID | None = Field(default=None, sa_column=Column(Uuid(), ForeignKey("users.id"), nullable=True))
    created_at: datetime = Field(default_factory=utcnow, sa_column=_created_at())
    decided_at: datetime | None = Field(default=None, sa_column=_when())
    decided_by: str = Field(default="", sa_column=Column(String(200), nullable=False, default=""))


class Invite(SQLModel, table=True):
    """An admin's invite link: its form approves the User at once, with these tokens and this tag."""

    __tablename__: ClassVar[str] = "invites"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    email: str = Field(sa_column=Column(String(EMAIL_MAX), nullable=False, index=True))
    token_hash: str = Field(sa_column=Column(String(64), nullable=False, unique=True))
    tokens: int | None = Field(default=None, sa_column=Column(BigInteger(), nullable=True))  # a Grant to the Budget
    tag: str | None = Field(default=None, sa_column=Column(String(32), nullable=True))
    created_by: str = Field(default="", sa_column=Column(String(200), nullable=False, default=""))
    created_at: datetime = Field(default_factory=utcnow, sa_column=_created_at())
    expires_at: datetime = Field(sa_column=_when(nullable=False))
    used_at: datetime | None = Field(default=None, sa_column=_when())


class PasswordLink(SQLModel, table=True):
    """A link that sets a User's password: used once, until it expires or a newer link ends it."""

    __tablename__: ClassVar[str] = "password_links"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    user_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("users.id"), nullable=False, index=True))
    purpose: LinkPurpose = Field(sa_column=_state(LinkPurpose, "purpose"))
    token_hash: str = Field(sa_column=Column(String(64), nullable=False, unique=True))
    created_at: datetime = Field(default_factory=utcnow, sa_column=_created_at())
    expires_at: datetime = Field(sa_column=_when(nullable=False))
    # Set when the link is used, or when a newer link of the same User ends it.
    ended_at: datetime | None = Field(default=None, sa_column=_when())


class AppSession(SQLModel, table=True):
    """A signed-in browser: its cookie holds the token; it ends at expires_at, sign-out, a new
    password or a suspension."""

    __tablename__: ClassVar[str] = "app_sessions"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    user_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("users.id"), nullable=False, index=True))
    token_hash: str = Field(sa_column=Column(String(64), nullable=False, unique=True))
    created_at: datetime = Field(default_factory=utcnow, sa_column=_created_at())
    renewed_at: datetime = Field(sa_column=_when(nullable=False))
    expires_at: datetime = Field(sa_column=_when(nullable=False))
    ended_at: datetime | None = Field(default=None, sa_column=_when())


class AccessTry(SQLModel, table=True):
    """One try to sign in, ask for a link or set a password, from one client address: counted in the
    ledger so that the limit holds across ingress replicas."""

    __tablename__: ClassVar[str] = "access_tries"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    family: str = Field(sa_column=Column(String(16), nullable=False))
    address: str = Field(sa_column=Column(String(100), nullable=False))
    at: datetime = Field(sa_column=_when(nullable=False))


_tries = table_of(AccessTry).c
Index("ix_access_tries_family_address_at", _tries.family, _tries.address, _tries.at)


class MailOutbox(SQLModel, table=True):
    """A mail to send, written in the transaction that made its link; sent after the commit, and
    tried again by the Runner's housekeeping while the SMTP server refuses it."""

    __tablename__: ClassVar[str] = "mail_outbox"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    to_address: str = Field(sa_column=Column(String(EMAIL_MAX), nullable=False))
    subject: str = Field(sa_column=Column(String(200), nullable=False))
    body: str = Field(sa_column=Column(Text(), nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_column=_created_at())
    sent_at: datetime | None = Field(default=None, sa_column=_when(index=True))
    # A sender claims a row until then, so that two processes never send the same mail at once.
    claimed_until: datetime | None = Field(default=None, sa_column=_when())
    tries: int = Field(default=0, sa_column=Column(Integer(), nullable=False, default=0))
    last_error: str | None = Field(default=None, sa_column=Column(Text(), nullable=True))
