"""The App's Send feedback: POST /account/feedback, with the session and the CSRF header (spec: "Send
feedback"). The body is JSON, its screenshots in base64 (api's one way to read a body; the App reads each
file with FileReader): 5 screenshots of 2 MB make the route's own body limit. HTTP in and out; the logic is
`domain/feedback/`.
"""
from __future__ import annotations

import uuid

from fastapi import APIRouter, BackgroundTasks, Request

from api.account.session import AccountDep
from api.auth import services_of
from api.body import read_json
from domain import errors
from domain.completions.validation import Msg
from domain.feedback import notes, validation

router = APIRouter(prefix="/feedback")


@router.post("", status_code=201)
async def send_feedback(request: Request, account: AccountDep, background: BackgroundTasks):
    body = await read_json(request, validation.BODY_MAX)
    if not isinstance(body, dict):
        raise errors.InvalidRequest(Msg.BODY)
    form = validation.read_form(body)
    services = services_of(request)
    # The browser's name is the request's own, never the body's; an anonymous note keeps none.
    sent = await notes.send(services, account.user_id, form, request.headers.get("user-agent", ""))
    if sent["linear"]:
        # After the answer: the User never waits for Linear, and Linear's failure is recorded, not shown.
        background.add_task(notes.to_linear, services, uuid.UUID(sent["id"]),
                            None if form.anonymous else account.email)
    return sent
