"""Admin routes of A User's Details (Organization, Discord handle) and the admins' notes on them. HTTP in and out; the logic is `domain/admin/`.

The page's other reads are here too: the User's Application (its answers) and their Usage page, counted as
GET /account/usage counts it for them."""
from __future__ import annotations

from fastapi import APIRouter, Request

from api.account.usage import QUERY as USAGE_QUERY, days_asked
from api.admin import bodies
from api.auth import AdminDep, services_of
from domain.admin import user_notes, user_page
from domain.completions.validation import text

router = APIRouter(prefix="/v1/admin/users")
USER = "a User id"


# The admins' notes -------------------------------------------------------------------------------
@router.get("/{user_id}/notes")
async def list_notes(user_id: str, request: Request, admin: AdminDep):
    """The User's notes, newest first, each with the admin who wrote it and when."""
    who = bodies.path_id(user_id, "user_id", USER)
    bodies.read_query(request, ())
    return await user_notes.list_notes(services_of(request), who)


@router.post("/{user_id}/notes")
async def add_note(user_id: str, request: Request, admin: AdminDep):
    """`text`: the note (trimmed; 1 to 5,000 characters). The answer is the notes, the new one first."""
    who = bodies.path_id(user_id, "user_id", USER)
    body = await bodies.read_fields(request, ("text",))
    note = text(bodies.required(body, "text"), "text")
    return await user_notes.add_note(services_of(request), who, note, admin.user_id)


@router.delete("/{user_id}/notes/{note_id}")
async def delete_note(user_id: str, note_id: str, request: Request, admin: AdminDep):
    who, note = bodies.path_id(user_id, "user_id", USER), bodies.path_id(note_id, "note_id", "a note id")
    return await user_notes.delete_note(services_of(request), who, note)


# What the page reads besides the User ---------------------------------------------------------------
@router.get("/{user_id}/application")
async def show_application(user_id: str, request: Request, admin: AdminDep):
    """The Application that made the User, with its answers; `application` null for a User made otherwise."""
    who = bodies.path_id(user_id, "user_id", USER)
    bodies.read_query(request, ())
    return await user_page.application(services_of(request), who)


@router.get("/{user_id}/usage-page")
async def show_usage_page(user_id: str, request: Request, admin: AdminDep):
    """The User's Usage page: the query and the answer of GET /account/usage (`range`, or `from` and `to`;
    `key`, `model`), as the User would read it."""
    who = bodies.path_id(user_id, "user_id", USER)
    services = services_of(request)
    now = services.clock()
    query = bodies.read_query(request, USAGE_QUERY)
    first, last = days_asked(query, now)
    key_id = bodies.optional_id(query, "key", "an API key id")
    return await user_page.usage_page(services, who, first, last, key_id, query.get("model"), now)
