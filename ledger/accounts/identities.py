"""The sign-in providers linked to each User: which provider, its subject (the provider's own id of the
person) and the email that it had verified when it was linked.

No provider token is kept, ever: a sign-in reads the provider's ID token (or GitHub's verified email) once,
and only these four facts stay. A provider's subject links to one User; a User links one subject of each
provider. The functions flush but do not commit.
"""
from __future__ import annotations

import uuid
from datetime import datetime
from typing import ClassVar

from sqlalchemy import Column, ForeignKey, String, UniqueConstraint, Uuid, delete, func
from sqlmodel import Field, SQLModel, col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.accounts.tables import AppSession
from ledger.store.coltypes import UtcDateTime
from ledger.store.ids import uuid7

PROVIDER_MAX = 40
SUBJECT_MAX = 255  # OpenID Connect: a subject is at most 255 ASCII characters


class SignInIdentity(SQLModel, table=True):
    """One provider linked to one User."""

    __tablename__: ClassVar[str] = "sign_in_identities"
    __table_args__ = (UniqueConstraint("provider", "subject"), UniqueConstraint("user_id", "provider"))

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    user_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("users.id"), nullable=False, index=True))
    provider: str = Field(sa_column=Column(String(PROVIDER_MAX), nullable=False))
    subject: str = Field(sa_column=Column(String(SUBJECT_MAX), nullable=False))
    email: str = Field(sa_column=Column(String(320), nullable=False))
    linked_at: datetime = Field(sa_column=Column(UtcDateTime(), nullable=False))


async def of_user(session: AsyncSession, user_id: uuid.UUID) -> list[SignInIdentity]:
    """The User's linked providers, oldest link first."""
    return list(await session.exec(select(SignInIdentity).where(SignInIdentity.user_id == user_id)
                                   .order_by(col(SignInIdentity.linked_at))))


async def by_subject(session: AsyncSession, provider: str, subject: str) -> SignInIdentity | None:
    return (await session.exec(select(SignInIdentity).where(SignInIdentity.provider == provider,
                                                             SignInIdentity.subject == subject))).first()


async def link(session: AsyncSession, user_id: uuid.UUID, provider: str, subject: str, email: str,
               now: datetime) -> SignInIdentity:
    row = SignInIdentity(user_id=user_id, provider=provider, subject=subject, email=email, linked_at=now)
    session.add(row)
    await session.flush()
    return row


async def unlink(session: AsyncSession, user_id: uuid.UUID, provider: str) -> bool:
    """Whether the User had this provider linked (it has not now)."""
    gone = await session.exec(delete(SignInIdentity).where(col(SignInIdentity.user_id) == user_id,
                                                           col(SignInIdentity.provider) == provider))
    return bool(gone.rowcount)


async def unlink_all(session: AsyncSession, user_id: uuid.UUID) -> None:
    """Every provider of the User, without a commit (a deleted User's sign-in ways go with them)."""
    await session.exec(delete(SignInIdentity).where(col(SignInIdentity.user_id) == user_id))


async def count_of_user(session: AsyncSession, user_id: uuid.UUID) -> int:
    return int((await session.exec(select(func.count()).select_from(SignInIdentity)
                                   .where(SignInIdentity.user_id == user_id))).one())


async def session_started_at(session: AsyncSession, session_id: uuid.UUID) -> datetime | None:
    """When the App's session began (its sign-in): unlinking asks for one younger than a day."""
    return (await session.exec(select(AppSession.created_at).where(AppSession.id == session_id))).first()
