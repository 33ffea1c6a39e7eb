"""Admin routes of the GPU spend and its stop (spec: "Watch the spend"). A Lock and a Clear record
the admin who made them. HTTP in and out; the logic is `domain/admin/spend.py`."""
from __future__ import annotations

from fastapi import APIRouter, Request

from api.admin import bodies
from api.auth import AdminDep, services_of
from domain.admin import spend

router = APIRouter(prefix="/v1/admin/spend")


@router.get("")
async def show_spend(request: Request, admin: AdminDep):
    """The last 24 hours' GPU spend, by model, the amounts that warn the team and pause new GPU work,
    and the stop; the GPU spend per day from `from` to `to` (UTC days, this month up to today by
    default), and who used each model in the last 48 hours."""
    bodies.read_query(request, ("from", "to"))
    return await spend.show(services_of(request), bodies.query_day(request, "from"), bodies.query_day(request, "to"))


@router.post("/lock")
async def lock_spend(request: Request, admin: AdminDep):
    """Pause new GPU work, with a `reason` if you want one."""
    reason = bodies.optional_text(await bodies.read_fields(request, ("reason",)), "reason")
    return await spend.lock(services_of(request), admin.name, reason)


@router.post("/clear")
async def clear_spend(request: Request, admin: AdminDep):
    await bodies.read_fields(request, ())
    return await spend.clear(services_of(request), admin.name)
