"""What the routes work with, built once per process by the composition root
(`cluster/composition.py`)."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from domain import errors
from domain.harvests.long_polls import LongPolls
from domain.inference.gateway import ModelGateway
from domain.metrics.counts import Counts
from domain.metrics.replica import replica_name
from domain.metrics.request_model import note_model
from domain.metrics.scrape import LedgerReadings
from domain.metrics.tally import PROCESS_TALLY
from domain.settings import Settings
from domain.tokenizers import TokenizerRegistry
from deployments.resident import NoResident, Resident
from harvest.storage import HarvestStorage
from ledger.store.coltypes import utcnow

MODEL_NOT_FOUND = "The model `{name}` does not exist. The API serves {ids}."


@dataclass
class Services:
    settings: Settings
    catalog: Any  # deployments.catalog.Catalog
    gateways: dict[str, ModelGateway]
    sessions: Any  # async_sessionmaker of the ledger
    ledger: Any  # domain.budget.TokenLedger
    traffic: Any  # domain.traffic.limits.Traffic
    idempotency: Any  # domain.idempotency.Idempotency
    admission: Any  # domain.completions.admission.Admission
    # The reads of a harvest that wait (`wait`), counted for the whole process.
    long_polls: LongPolls
    # Where the harvests' files are, for their download links.
    harvest_storage: HarvestStorage
    # The ledger's counts that /metrics shows, read at most every ACS_METRICS_LEDGER_CACHE_S.
    metrics_readings: LedgerReadings
    tokenizers: TokenizerRegistry = field(default_factory=TokenizerRegistry)
    # The kinds of background work that Runners run (GET /health lists them).
    work_kinds: list[Any] = field(default_factory=list)
    # What /metrics counts (requests, settled tokens): this process's, or the cluster's in Redis.
    counts: Counts = field(default_factory=lambda: Counts(PROCESS_TALLY))
    # The `replica` label of the series this process keeps for itself (in flight, breakers, lines).
    replica: str = field(default_factory=replica_name)
    started_at: float = field(default_factory=time.time)
    # The App's mail (ledger.accounts.mail.Mailer; None keeps mail in the outbox) and the time that its sessions,
    # links and sign-in tries read, and the harvests' (their month, links, cancels): tests hand in a clock
    # of their own.
    mailer: Any = None
    clock: Callable[[], datetime] = utcnow
    # Told the kind (ledger.work.tables.WorkKind) of work just queued, so that a Runner claims it at
    # once: in Serve a call on the Runner's handle. The Runner's poll is the fallback, so a
    # nudge that is lost (or none, in a test) only delays the work by one poll.
    wake_runner: Callable[[Any], None] = lambda kind: None
    # What the ingress's replica hosts beside the routes, with the replica's life: a colocated
    # profile's engines and Runner (deployments/resident.py); nothing otherwise.
    resident: Resident = field(default_factory=NoResident)

    def served_models(self) -> list[Any]:
        return list(self.catalog.models.values())

    def resolve_model(self, name: str | None) -> Any:
        model = self.catalog.resolve(name)
        if model is None:
            ids = ", ".join(self.catalog.models)
            raise errors.ModelNotFound(MODEL_NOT_FOUND.format(name=name, ids=ids), "model")
        note_model(model.id)  # the request's `model` label on /metrics
        return model
