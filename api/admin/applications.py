"""Admin routes of Applications and Invites (spec: "Get access"): list, read, approve, reject; make Invites
with a tag and tokens. HTTP in and out; the logic is `domain/admin/applications.py`. An approval or a
rejection mails the applicant after the answer."""
from __future__ import annotations

from fastapi import APIRouter, BackgroundTasks, Request

from api.admin import bodies
from api.auth import AdminDep, services_of
from domain.account.access import send_mail
from domain.admin import applications
from domain.completions.validation import text

router = APIRouter(prefix="/v1/admin")
APPLICATION = "an Application id"


@router.get("/applications")
async def list_applications(request: Request, admin: AdminDep):
    """Every Application, the waiting ones first; `?status=` waiting, approved or rejected."""
    query = bodies.read_query(request, ("status",))
    return await applications.list_applications(services_of(request), applications.status_of(query.get("status")))


@router.get("/applications/{application_id}")
async def show_application(application_id: str, request: Request, admin: AdminDep):
    """One Application with every answer of the Apply form."""
    found = bodies.path_id(application_id, "application_id", APPLICATION)
    return await applications.show_application(services_of(request), found)


@router.post("/applications/{application_id}/approve")
async def approve_application(application_id: str, request: Request, admin: AdminDep, background: BackgroundTasks):
    """Make the User and mail the approval with its password link; `tokens` (optional) go to its Budget."""
    found = bodies.path_id(application_id, "application_id", APPLICATION)
    body = await bodies.read_fields(request, ("tokens",))
    tokens = None if body.get("tokens") is None else bodies.tokens(body, "tokens", least=1)
    services = services_of(request)
    answer = await applications.approve(services, found, tokens, admin.name)
    background.add_task(send_mail, services)
    return answer


@router.post("/applications/{application_id}/reject")
async def reject_application(application_id: str, request: Request, admin: AdminDep, background: BackgroundTasks):
    """Mail the rejection, with `note` (optional) and a link to the Apply form."""
    found = bodies.path_id(application_id, "application_id", APPLICATION)
    note = bodies.optional_text(await bodies.read_fields(request, ("note",)), "note")
    services = services_of(request)
    answer = await applications.reject(services, found, note, admin.name)
    background.add_task(send_mail, services)
    return answer


@router.post("/invites")
async def create_invite(request: Request, admin: AdminDep):
    """An invite link for `email` (once, for 7 days), with `tag` and `tokens` (both optional). The answer
    holds the link; nothing else shows it again, and no mail goes out."""
    body = await bodies.read_fields(request, ("email", "tag", "tokens"))
    email = text(bodies.required(body, "email"), "email")
    tag = bodies.optional_text(body, "tag").strip() or None
    tokens = None if body.get("tokens") in (None, "") else bodies.tokens(body, "tokens", least=1)
    return await applications.create_invite(services_of(request), email, tag, tokens, admin.name)
