"""Admin routes of the Feedback tab: every note with its page, type, screenshots, errors and request ids,
newest first, and each screenshot's bytes. HTTP in and out; the logic is `domain/feedback/notes.py`."""
from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from api.admin import bodies
from api.auth import AdminDep, services_of
from domain.completions.validation import integer
from domain.feedback import notes

router = APIRouter(prefix="/v1/admin/feedback")
NOTE = "a feedback note's id"
PAGE_DEFAULT, PAGE_MAX = 50, 200


@router.get("")
async def list_notes(request: Request, admin: AdminDep):
    query = bodies.read_query(request, ("limit", "before"))
    limit = PAGE_DEFAULT
    if "limit" in query:
        written = query["limit"]
        limit = integer(int(written) if written.isdigit() else written, "limit",
                        f"a whole number from 1 to {PAGE_MAX}", ge=1, le=PAGE_MAX)
    before = bodies.optional_id(query, "before", NOTE)
    return await notes.list_notes(services_of(request), limit, before)


@router.get("/{note_id}/screenshots/{file}")
async def screenshot(note_id: str, file: str, request: Request, admin: AdminDep) -> Response:
    data, media_type = await notes.screenshot(services_of(request), bodies.path_id(note_id, "note_id", NOTE), file)
    # The type was read from the bytes when the note came; an admin's browser shows it, never runs it.
    return Response(data, media_type=media_type, headers={"Cache-Control": "private, max-age=3600",
                                                          "Content-Disposition": "inline"})
