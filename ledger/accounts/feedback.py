"""The App's feedback notes (Send feedback): what a User sent, where its screenshots are kept, and the
Linear issue that it became. The screenshots' bytes are in file storage (domain/feedback/storage.py);
a row lists them by their file names.

An anonymous note keeps no User, no browser name and no errors or request ids: the columns are empty,
not hidden, so nothing can show them later.
"""
from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import Column, ForeignKey, String, Text, Uuid
from sqlalchemy.types import JSON
from sqlmodel import Field, SQLModel, col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.accounts.tables import User
from ledger.store.columns import _created_at, _state
from ledger.store.ids import uuid7

PAGE_MAX = 2_000  # an address of the App, its query included
BROWSER_MAX = 500  # a User-Agent header, cut
LINEAR_URL_MAX = 500
LINEAR_ERROR_MAX = 500


class FeedbackKind(str, enum.Enum):
    """What is it about?"""

    bug = "bug"
    feature_request = "feature_request"
    general = "general"


class FeedbackNote(SQLModel, table=True):
    __tablename__: ClassVar[str] = "feedback_notes"

    id: uuid.UUID = Field(default_factory=uuid7, sa_column=Column(Uuid(), primary_key=True))
    created_at: datetime = Field(sa_column=_created_at())
    # None for an anonymous note.
    user_id: uuid.UUID | None = Field(default=None, sa_column=Column(Uuid(), ForeignKey("users.id"), nullable=True,
                                                                      index=True))
    kind: FeedbackKind = Field(sa_column=_state(FeedbackKind, "kind"))
    note: str = Field(sa_column=Column(Text(), nullable=False))
    page: str = Field(default="", sa_column=Column(String(PAGE_MAX), nullable=False, default=""))
    browser: str = Field(default="", sa_column=Column(String(BROWSER_MAX), nullable=False, default=""))
    # The App's recent failed calls: [{status, code, message, request_id, path, at}], oldest first.
    errors: list[Any] = Field(default_factory=list, sa_column=Column(JSON(), nullable=False))
    # The screenshots in file storage, in the order sent: [{file, type, size}].
    screenshots: list[Any] = Field(default_factory=list, sa_column=Column(JSON(), nullable=False))
    # The note's Linear issue, once made; else why none was made ("" when Linear is not set up).
    linear_url: str | None = Field(default=None, sa_column=Column(String(LINEAR_URL_MAX), nullable=True))
    linear_error: str = Field(default="", sa_column=Column(String(LINEAR_ERROR_MAX), nullable=False, default=""))


@dataclass(frozen=True)
class NoteLine:
    """A note with its User's email and name, as Admin's Feedback tab lists it (None: anonymous)."""

    note: FeedbackNote
    email: str | None
    name: str | None


async def add_note(session: AsyncSession, note: FeedbackNote) -> FeedbackNote:
    """Commits. The note is checked by the caller (domain/feedback/validation.py)."""
    session.add(note)
    await session.commit()
    return note


async def record_linear(session: AsyncSession, note_id: uuid.UUID, *, url: str | None, error: str) -> None:
    """Commits what became of the note's Linear issue: its address, or why there is none."""
    note = await session.get(FeedbackNote, note_id)
    if note is None:
        return
    note.linear_url = url[:LINEAR_URL_MAX] if url else None
    note.linear_error = error[:LINEAR_ERROR_MAX]
    session.add(note)
    await session.commit()


async def get_note(session: AsyncSession, note_id: uuid.UUID) -> FeedbackNote | None:
    return await session.get(FeedbackNote, note_id)


async def list_notes(session: AsyncSession, *, limit: int, before: uuid.UUID | None = None) -> list[NoteLine]:
    """Newest first (ids are uuid7: in the order they were made), `limit` of them after `before`'s."""
    query = (select(FeedbackNote, User.email, User.name)
             .join(User, col(User.id) == col(FeedbackNote.user_id), isouter=True)
             .order_by(col(FeedbackNote.id).desc()).limit(limit))
    if before is not None:
        query = query.where(col(FeedbackNote.id) < before)
    return [NoteLine(note, email, name) for note, email, name in await session.exec(query)]


async def without_issue(session: AsyncSession, *, made_after: datetime, made_before: datetime) -> list[NoteLine]:
    """The notes made between the two times that have no Linear issue yet, oldest first, with their
    Users' emails: those whose issue failed, and those whose try never ended (a process that stopped)."""
    query = (select(FeedbackNote, User.email, User.name)
             .join(User, col(User.id) == col(FeedbackNote.user_id), isouter=True)
             .where(col(FeedbackNote.linear_url).is_(None), col(FeedbackNote.created_at) > made_after,
                    col(FeedbackNote.created_at) <= made_before)
             .order_by(col(FeedbackNote.id)))
    return [NoteLine(note, email, name) for note, email, name in await session.exec(query)]
