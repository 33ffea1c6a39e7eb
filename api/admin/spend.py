"""Admin routes of the GPU spend and its stop (spec: "Watch the spend"). A Lock and a Clear record
the admin who made them. HTTP in and out; the logic is `ledger/operations/`."""
from __future__ import annotations

from fastapi import APIRouter, Request

from api.admin import bodies, context
from api.auth import AdminDep
from domain.error_mapping import ledger_refusals
from domain.operations import documents, spend_page

router = APIRouter(prefix="/v1/admin/spend")


@router.get("")
async def show_spend(request: Request, admin: AdminDep):
    """The last 24 hours' GPU spend, by model, the amount that pauses new GPU work, and the stop."""
    async with context.reads(request) as session:
        return documents.spend_page(await spend_page.spend_page(session, context.platform(request)))


@router.post("/lock")
async def lock_spend(request: Request, admin: AdminDep):
    """Pause new GPU work, with a `reason` if you want one."""
    reason = bodies.optional_text(await bodies.read_fields(request, ("reason",)), "reason")
    async with context.writes(request) as session:
        with ledger_refusals("reason"):
            page = await spend_page.lock(session, context.platform(request), admin.name, reason)
    return documents.spend_page(page)


@router.post("/clear")
async def clear_spend(request: Request, admin: AdminDep):
    await bodies.read_fields(request, ())
    async with context.writes(request) as session:
        return documents.spend_page(await spend_page.clear(session, context.platform(request), admin.name))
