"""Every admin route, under /v1/admin: one router for the app to include."""
from __future__ import annotations

from fastapi import APIRouter

from api.admin import analytics, spend, users, warm

router = APIRouter()
for part in (users.router, spend.router, warm.router, analytics.router):
    router.include_router(part)
