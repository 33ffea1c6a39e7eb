"""What the admin's operations take from the settings and the catalog, for the routes and the CLI."""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from domain.settings import Settings
from ledger.store.coltypes import utcnow
from domain.operations.platform import Platform


def platform_of(settings: Settings, catalog: Any, clock: Callable[[], datetime] = utcnow) -> Platform:
    """`catalog` is deployments.catalog.Catalog: a Warm hour of a model costs its replica's GPUs."""
    return Platform(
        monthly_allowance=settings.monthly_allowance,
        job_result_kept=timedelta(seconds=settings.job_result_kept_s),
        spend_pause_usd=settings.spend_pause_usd,
        replica_hour_usd={model_id: spec.replica_hour_usd for model_id, spec in catalog.models.items()},
        clock=clock,
    )
