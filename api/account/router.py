"""The App's keys, usage, token-request, Playground Runs and Loom routes under /account, for the app to
include with the access routes (`api/account/access_router.py`)."""
from __future__ import annotations

from fastapi import APIRouter

from api.account import feedback, keys, looms, models, providers, runs, token_requests, usage

router = APIRouter(prefix="/account")
for part in (keys.router, usage.router, models.router, token_requests.router, runs.router, looms.router,
             feedback.router, providers.router):
    router.include_router(part)
