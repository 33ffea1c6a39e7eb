"""What the operations take from the settings and the catalog: the ledger reads neither."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ledger.store.coltypes import utcnow
from ledger.tokens.holds import DEFAULT_MONTHLY_ALLOWANCE

DEFAULT_SPEND_PAUSE_USD = 3000.0  # the spec's Spend limit


@dataclass(frozen=True)
class Platform:
    monthly_allowance: int = DEFAULT_MONTHLY_ALLOWANCE  # of a User without an allowance of its own
    job_result_kept: timedelta = timedelta(days=30)
    # New GPU work pauses when the last 24 hours cost more (ACS_SPEND_PAUSE_USD).
    spend_pause_usd: float = DEFAULT_SPEND_PAUSE_USD
    # What one Warm hour of each served model costs: its replica's GPUs at the catalog's
    # price per GPU-hour. Its keys are the models a window may keep Warm.
    replica_hour_usd: Mapping[str, float] = field(default_factory=dict)
    # "Now" of every view and change: tests hand in a fixed clock.
    clock: Callable[[], datetime] = utcnow
