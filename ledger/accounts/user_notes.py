"""The admins' notes on a User (A User's page on Admin): each keeps its text, the admin who wrote it and
when. Only admins read them; the User never sees them.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from sqlalchemy import Column, ForeignKey, Text, Uuid
from sqlmodel import Field, SQLModel, col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.accounts.tables import User
from ledger.errors import NotFound
from ledger.store.coltypes import utcnow
from ledger.store.columns import _created_at
from ledger.store.ids import uuid7

NOTE_MAX = 5_000  # characters: a few paragraphs, as the App's Feedback note allows


class UserNote(SQLModel, table=True):
    __tablename__: ClassVar[str] = "user_notes"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    user_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("users.id"), nullable=False, index=True))
    text: str = Field(sa_column=Column(Text(), nullable=False))
    # The admin who wrote it: a User too, so the page names them as they are called now.
    author_id: uuid.UUID = Field(sa_column=Column(Uuid(), ForeignKey("users.id"), nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_column=_created_at())


@dataclass(frozen=True)
class NoteLine:
    """A note with its author's name and email, as the page lists it."""

    note: UserNote
    author_name: str
    author_email: str | None


async def add_note(session: AsyncSession, user_id: uuid.UUID, author_id: uuid.UUID, text: str,
                   now: datetime) -> UserNote:
    """Commits. The text is checked by the caller (domain/admin/user_notes.py)."""
    note = UserNote(user_id=user_id, author_id=author_id, text=text, created_at=now)
    session.add(note)
    await session.commit()
    return note


async def notes_of(session: AsyncSession, user_id: uuid.UUID) -> list[NoteLine]:
    """The User's notes, newest first (ids are uuid7: ordered as they were made, within one time)."""
    query = (select(UserNote, User.name, User.email).join(User, col(User.id) == col(UserNote.author_id))
             .where(UserNote.user_id == user_id)
             .order_by(col(UserNote.created_at).desc(), col(UserNote.id).desc()))
    return [NoteLine(note, name, email) for note, name, email in await session.exec(query)]


async def delete_note(session: AsyncSession, user_id: uuid.UUID, note_id: uuid.UUID) -> None:
    """Commits; a note of another User is not found, as one that does not exist."""
    note = await session.get(UserNote, note_id)
    if note is None or note.user_id != user_id:
        raise NotFound(f"This User has no note with the id {note_id}.")
    await session.delete(note)
    await session.commit()
