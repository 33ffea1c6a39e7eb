"""Admin routes of A User's Details (Organization, Discord handle) and the admins' notes on them. HTTP in and out; the logic is `domain/admin/`.

Being built (issue 37)."""
from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/v1/admin/users")
