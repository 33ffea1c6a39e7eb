"""The `Idempotency-Key` header of every writing route (spec/docs.md "Send a request again
safely"): each router reads it here and hands the key to its use case."""
from __future__ import annotations

from fastapi import Request

from domain.idempotency import checked_key

HEADER = "Idempotency-Key"


def idempotency_key(request: Request) -> str | None:
    """The request's key, or None without the header; 400 outside 1 to 255 characters."""
    return checked_key(request.headers.get(HEADER))
