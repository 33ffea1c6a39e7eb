"""What the operations take from the settings and the catalog: the ledger reads neither."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from domain.settings import Settings
from ledger.store.coltypes import utcnow
from ledger.tokens.holds import DEFAULT_MONTHLY_ALLOWANCE

if TYPE_CHECKING:
    from domain.services import Services

DEFAULT_SPEND_PAUSE_USD = 3000.0  # the spec's Spend limit
DEFAULT_SPEND_WARN_USD = (1000.0, 2000.0)  # below the pause: the team hears first


@dataclass(frozen=True)
class Platform:
    monthly_allowance: int = DEFAULT_MONTHLY_ALLOWANCE  # of a User without an allowance of its own
    job_result_kept: timedelta = timedelta(days=30)
    # New GPU work pauses when the last 24 hours cost more (ACS_SPEND_PAUSE_USD).
    spend_pause_usd: float = DEFAULT_SPEND_PAUSE_USD
    # The amounts of that count that mail the team (ACS_SPEND_WARN_USD), lowest first.
    spend_warn_usd: tuple[float, ...] = DEFAULT_SPEND_WARN_USD
    # What one Warm hour of each served model costs: its replica's GPUs at the catalog's
    # price per GPU-hour. Its keys are the models a window may keep Warm.
    replica_hour_usd: Mapping[str, float] = field(default_factory=dict)
    # The replicas that each served model keeps without requests (the catalog's min_replicas): its Floor.
    floors: Mapping[str, int] = field(default_factory=dict)
    # "Now" of every view and change: tests hand in a fixed clock.
    clock: Callable[[], datetime] = utcnow


def platform_of(settings: Settings, catalog: Any, clock: Callable[[], datetime] = utcnow) -> Platform:
    """`catalog` is deployments.catalog.Catalog: a Warm hour of a model costs its replica's GPUs."""
    return Platform(
        monthly_allowance=settings.monthly_allowance,
        job_result_kept=timedelta(seconds=settings.job_result_kept_s),
        spend_pause_usd=settings.spend_pause_usd,
        spend_warn_usd=tuple(sorted(settings.spend_warn_usd)),
        replica_hour_usd={model_id: spec.replica_hour_usd for model_id, spec in catalog.models.items()},
        floors={model_id: spec.autoscaling.min_replicas for model_id, spec in catalog.models.items()},
        clock=clock,
    )


def platform_of_services(services: Services) -> Platform:
    # The services' clock: tests hand in their own "now" (a Usage page's today, a change's time).
    return platform_of(services.settings, services.catalog, services.clock)
