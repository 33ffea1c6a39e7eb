"""Admin routes of Token requests: list, read, approve with Tokens to grant, reject with a Note to them. HTTP in and out; the logic is `domain/admin/`.

Being built (issue 37)."""
from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/v1/admin/token-requests")
