"""The admins' notes on a User, on A User's page: list, add, delete. Each note keeps the admin who wrote it."""
from __future__ import annotations

import uuid
from typing import Any

from domain import errors
from domain.operations import users
from domain.operations.documents import iso
from domain.services import Services
from ledger.accounts import user_notes
from ledger.accounts.user_notes import NOTE_MAX, NoteLine

EMPTY = "Write the note."
TOO_LONG = f"Write at most {NOTE_MAX:,} characters in the note."


def checked_text(text: str) -> str:
    """The note as kept: trimmed, not empty, at most NOTE_MAX characters (400 naming `text` otherwise)."""
    text = text.strip()
    if not text:
        raise errors.InvalidRequest(EMPTY, "text")
    if len(text) > NOTE_MAX:
        raise errors.InvalidRequest(TOO_LONG, "text")
    return text


async def list_notes(services: Services, who: uuid.UUID) -> dict[str, Any]:
    """The User's notes, newest first."""
    async with services.sessions() as session:
        user = await users.find_user(session, who)
        return {"notes": [note_document(line) for line in await user_notes.notes_of(session, user.id)]}


async def add_note(services: Services, who: uuid.UUID, text: str, author: uuid.UUID) -> dict[str, Any]:
    """A note on the User by the admin `author`; the answer is the notes, newest first, the new one on top."""
    text = checked_text(text)
    async with services.ledger.write_sessions() as session:
        user = await users.find_user(session, who)
        user_id = user.id  # the commit below expires the User
        await user_notes.add_note(session, user_id, author, text, services.clock())
        return {"notes": [note_document(line) for line in await user_notes.notes_of(session, user_id)]}


async def delete_note(services: Services, who: uuid.UUID, note_id: uuid.UUID) -> dict[str, Any]:
    """Any admin may delete a note (the notes are the team's); the answer is the notes left."""
    async with services.ledger.write_sessions() as session:
        user = await users.find_user(session, who)
        user_id = user.id
        await user_notes.delete_note(session, user_id, note_id)
        return {"notes": [note_document(line) for line in await user_notes.notes_of(session, user_id)]}


def note_document(line: NoteLine) -> dict[str, Any]:
    note = line.note
    return {"id": str(note.id), "text": note.text, "created_at": iso(note.created_at),
            "author": {"id": str(note.author_id), "name": line.author_name, "email": line.author_email}}
