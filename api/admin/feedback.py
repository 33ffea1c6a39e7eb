"""Admin routes of the Feedback tab: every note with its page, type, screenshots, errors and request ids. HTTP in and out; the logic is `domain/admin/`.

Being built (issue 37)."""
from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/v1/admin/feedback")
