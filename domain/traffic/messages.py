"""The messages of the traffic 429s, all in one place.

The spec (Limits, Traffic): "The message of a 429 names the limit and says how
many seconds to wait." The wait is the one the Retry-After header carries.
"""
from __future__ import annotations

import math
from typing import Literal

from domain.errors import QueueFull, RateLimited

BucketKind = Literal["work", "other", "address", "app"]

# The limit as the spec's Traffic table names it, per bucket.
_LIMITS: dict[BucketKind, str] = {
    "work": "This API key sent more than {n} requests that start work in a minute.",
    "other": "This API key sent more than {n} other requests to /v1 in a minute.",
    "address": (
        "This address sent more than {n} requests to /v1 with a missing, wrong, "
        "or revoked API key in a minute."
    ),
    "app": "You started more than {n} Runs, Completions, Jobs, and Branches in the App in a minute.",
}
_QUEUE_FULL = (
    "This API key has {running} Completions running and {waiting} waiting, "
    "the most it may have. Try again in {seconds} seconds."
)
QUEUE_FULL_RETRY_AFTER = 5


def retry_after_seconds(wait_s: float) -> int:
    """Retry-After is whole seconds; rounding up, and at least 1, so a retry
    at that time finds a token."""
    return max(1, math.ceil(wait_s))


def _try_again(seconds: int) -> str:
    return f"Try again in {seconds} second{'' if seconds == 1 else 's'}."


def rate_limited(kind: BucketKind, per_minute: int, wait_s: float) -> RateLimited:
    """429 rate_limited for one of the three buckets, with its Retry-After."""
    seconds = retry_after_seconds(wait_s)
    message = f"{_LIMITS[kind].format(n=per_minute)} {_try_again(seconds)}"
    return RateLimited(message, retry_after=seconds)


def queue_full(max_running: int, max_waiting: int) -> QueueFull:
    """429 queue_full: the key's line has its most running and waiting."""
    message = _QUEUE_FULL.format(
        running=max_running, waiting=max_waiting, seconds=QUEUE_FULL_RETRY_AFTER
    )
    return QueueFull(message, retry_after=QUEUE_FULL_RETRY_AFTER)
