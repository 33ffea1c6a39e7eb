"""Send feedback (spec: "Send feedback"), and the notes that Admin's Feedback tab reads.

A note is stored first: its screenshots in file storage (domain/feedback/storage.py), then its row, so a
row never names a file that is not there. Only then, and only where ACS_LINEAR_API_KEY is set, does it
become a Linear issue (`to_linear`, which the route runs after its answer). When Linear is down or
refuses, the note stays as it is, and its row keeps Linear's reason instead of the issue's address: the
Feedback tab shows it in the Linear column, and nothing is lost.

What goes to Linear is what the spec lists: the note, its page, its screenshots, and the User's email
unless the note is anonymous. The recent errors and request ids, and the browser's name, stay here.
"""
from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta
from typing import Any

from domain import errors
from domain.feedback.linear import LinearClient, LinearFailed
from domain.feedback.storage import FeedbackStorage
from domain.feedback.validation import KIND_LABELS, FeedbackForm
from domain.operations.documents import iso
from domain.services import Services
from domain.settings import Settings
from domain.traffic.messages import retry_after_seconds
from ledger.accounts import feedback as ledger
from ledger.accounts.feedback import BROWSER_MAX, FeedbackNote
from ledger.store.ids import uuid7

# A person writes a few notes an hour at most; a script that loops fills no disk: 10 at once, then one
# each 6 minutes, per User (the traffic's token buckets, shared by every replica where Redis is).
NOTES_BURST = 10
NOTES_REFILL_PER_S = 10 / 3600
TOO_MANY_NOTES = "You sent more than 10 notes in an hour. Try again in {seconds} seconds."
NOTE_NOT_FOUND = "No feedback note or screenshot has this id."
TITLE_MAX = 80
# The Runner tries again the notes without an issue that are older than the route's own try can be,
# for a week: Linear refusing the same note for longer is not a passing outage.
LINEAR_SETTLE = timedelta(minutes=5)
LINEAR_RETRY_FOR = timedelta(days=7)


def storage_of(services: Services) -> FeedbackStorage:
    return FeedbackStorage(services.harvest_storage)


def linear_of(settings: Settings) -> LinearClient | None:
    """The Linear client where ACS_LINEAR_API_KEY is set (with its team, as the settings require)."""
    key = settings.linear_api_key.get_secret_value().strip() if settings.linear_api_key else ""
    team = (settings.linear_team_id or "").strip()
    if not key or not team:
        return None
    return LinearClient(key, team, api_url=settings.linear_api_url, timeout_s=settings.linear_timeout_s)


async def send(services: Services, user_id: uuid.UUID, form: FeedbackForm, browser: str) -> dict[str, Any]:
    """Store the note; an anonymous one with no User, no browser name and no errors (`form` has none)."""
    wait = await services.traffic.limiter.take(f"user:{user_id}:feedback", capacity=NOTES_BURST,
                                               refill_per_s=NOTES_REFILL_PER_S)
    if wait is not None:
        seconds = retry_after_seconds(wait)
        raise errors.RateLimited(TOO_MANY_NOTES.format(seconds=seconds), retry_after=seconds)
    note_id = uuid7()
    storage = storage_of(services)
    files = []
    try:
        for number, shot in enumerate(form.screenshots, start=1):
            name = f"{number}.{shot.extension}"
            await asyncio.to_thread(storage.write, note_id, name, shot.data)
            files.append({"file": name, "name": shot.name, "type": shot.media_type, "size": len(shot.data)})
        note = FeedbackNote(id=note_id, created_at=services.clock(), user_id=None if form.anonymous else user_id,
                            kind=form.kind, note=form.note, page=form.page,
                            browser="" if form.anonymous else browser[:BROWSER_MAX],
                            errors=[] if form.anonymous else form.errors, screenshots=files)
        async with services.ledger.write_sessions() as session:
            await ledger.add_note(session, note)
    except BaseException:
        await asyncio.to_thread(storage.delete, note_id)  # no files without their row
        raise
    return {"id": str(note_id), "linear": linear_of(services.settings) is not None}


def issue_title(note: FeedbackNote) -> str:
    first = " ".join(note.note.split())
    cut = first if len(first) <= TITLE_MAX else first[:TITLE_MAX - 1].rstrip() + "…"
    return f"{KIND_LABELS[note.kind]}: {cut}"


def issue_description(note: FeedbackNote, email: str | None, assets: list[tuple[str, str]]) -> str:
    """Markdown: the note, its page, who sent it (no one, when anonymous) and its screenshots."""
    lines = [note.note, "", f"**Page:** {note.page or 'not sent'}",
             f"**From:** {email if email else 'an anonymous User'}",
             f"**In ACS Infra:** feedback note {note.id}"]
    if assets:
        # A file's name is the User's: brackets in it would end Markdown's image text early.
        lines += ["", *(f"![{name.replace('[', '(').replace(']', ')')}]({address})" for name, address in assets)]
    return "\n".join(lines)


async def to_linear(services: Services, note_id: uuid.UUID, email: str | None) -> None:
    """Make the note's Linear issue and record its address, or record why Linear made none. Never raises
    for Linear's sake: the note is stored already, whatever Linear does."""
    client = linear_of(services.settings)
    if client is None:
        return
    async with services.sessions() as session:
        note = await ledger.get_note(session, note_id)
    if note is None:
        return
    storage = storage_of(services)
    url, reason = None, ""
    try:
        assets = []
        for shot in note.screenshots:
            data = await asyncio.to_thread(storage.read, note.id, shot["file"])
            assets.append((shot["name"], await client.upload(shot["file"], shot["type"], data)))
        url = await client.create_issue(issue_title(note), issue_description(note, None if note.user_id is None
                                                                            else email, assets))
    except LinearFailed as failure:
        reason = str(failure)
    except OSError as failure:  # a screenshot that storage cannot read: say so, as Linear's refusals are
        reason = f"A screenshot could not be read from storage: {type(failure).__name__}."
    async with services.ledger.write_sessions() as session:
        await ledger.record_linear(session, note.id, url=url, error=reason)


async def retry_linear(services: Services, now: datetime) -> int:
    """The Runner's housekeeping: each note of the last 7 days that has no Linear issue gets another
    try, once its route's own try had time to end (LINEAR_SETTLE). So a Linear that was down, or a
    replica that stopped between its answer and Linear, loses no issue. How many it tried."""
    if linear_of(services.settings) is None:
        return 0
    async with services.sessions() as session:
        waiting = await ledger.without_issue(session, made_after=now - LINEAR_RETRY_FOR,
                                             made_before=now - LINEAR_SETTLE)
    for line in waiting:
        await to_linear(services, line.note.id, line.email)
    return len(waiting)


# -- Admin's Feedback tab ---------------------------------------------------------------------------------

def note_document(line: ledger.NoteLine) -> dict[str, Any]:
    note = line.note
    user = None if note.user_id is None else {"id": str(note.user_id), "email": line.email, "name": line.name}
    return {"id": str(note.id), "created_at": iso(note.created_at), "kind": note.kind.value, "note": note.note,
            "page": note.page, "anonymous": note.user_id is None, "user": user, "browser": note.browser,
            "errors": note.errors,
            "screenshots": [{**shot, "url": f"v1/admin/feedback/{note.id}/screenshots/{shot['file']}"}
                            for shot in note.screenshots],
            "linear": {"url": note.linear_url, "error": note.linear_error or None}}


async def list_notes(services: Services, limit: int, before: uuid.UUID | None) -> dict[str, Any]:
    """Newest first, `limit` a page; `has_more` says whether older notes follow the last."""
    async with services.sessions() as session:
        lines = await ledger.list_notes(session, limit=limit + 1, before=before)
    return {"data": [note_document(line) for line in lines[:limit]], "has_more": len(lines) > limit}


async def screenshot(services: Services, note_id: uuid.UUID, file: str) -> tuple[bytes, str]:
    """A screenshot's bytes and media type; NotFound for a file that its note does not list."""
    async with services.sessions() as session:
        note = await ledger.get_note(session, note_id)
    shot = next((shot for shot in (note.screenshots if note else []) if shot.get("file") == file), None)
    if note is None or shot is None:
        raise errors.NotFound(NOTE_NOT_FOUND)
    data = await asyncio.to_thread(storage_of(services).read, note.id, file)
    return data, shot["type"]
