"""Every admin route, under /v1/admin: one router for the app to include."""
from __future__ import annotations

from fastapi import APIRouter

from api.admin import analytics, applications, feedback, spend, token_requests, user_details, users, warm

router = APIRouter()
for part in (users.router, user_details.router, applications.router, token_requests.router, spend.router,
             warm.router, analytics.router, feedback.router):
    router.include_router(part)
