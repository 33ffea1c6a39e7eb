"""Admin routes of Applications and Invites: list, read, approve, reject; make Invites with a tag and tokens. HTTP in and out; the logic is `domain/admin/`.

Being built (issue 37)."""
from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/v1/admin")
