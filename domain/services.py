"""What the routes work with, built once per process by the composition root
(`cluster/composition.py`), and never changed after: `Services` is frozen, and every part is
built before it (a test that wants another part builds its stack with it)."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from domain import errors
from domain.budget import TokenLedger
from domain.completions.admission import Admission
from domain.feeds import Feed
from domain.harvests.long_polls import LongPolls
from domain.idempotency import Idempotency
from domain.inference.gateway import ModelGateway
from domain.metrics.counts import Counts
from domain.metrics.replica import replica_name
from domain.metrics.request_model import note_model
from domain.metrics.scrape import LedgerReadings
from domain.metrics.tally import PROCESS_TALLY
from domain.settings import Settings
from domain.tokenizers import TokenizerRegistry
from domain.traffic.limits import Traffic
from deployments.catalog import Catalog, ModelSpec
from deployments.resident import NoResident, Resident
from harvest.storage import HarvestStorage
from ledger.accounts.mail import Mailer
from ledger.store.coltypes import utcnow
from ledger.work.tables import WorkKind

MODEL_NOT_FOUND = "The model `{name}` does not exist. The API serves {ids}."


def no_runner_here(kind: WorkKind) -> None:
    """Tell no Runner of queued work: the Runners' poll finds it (a process with no Runner to reach)."""


@dataclass(frozen=True)
class Services:
    settings: Settings
    catalog: Catalog
    gateways: dict[str, ModelGateway]
    sessions: async_sessionmaker[AsyncSession]  # the ledger's reads
    ledger: TokenLedger
    traffic: Traffic
    idempotency: Idempotency
    admission: Admission
    # The reads of a harvest that wait (`wait`), counted for the whole process.
    long_polls: LongPolls
    # Where the harvests' files are, for their download links.
    harvest_storage: HarvestStorage
    # The ledger's counts that /metrics shows, read at most every ACS_METRICS_LEDGER_CACHE_S.
    metrics_readings: LedgerReadings
    # Where what grows is pushed to the streams that follow it (a Loom's Nodes): Redis's pub/sub
    # where the platform has Redis, so the Runner's replica reaches every ingress; else this process's.
    feed: Feed
    tokenizers: TokenizerRegistry = field(default_factory=TokenizerRegistry)
    # The kinds of background work that Runners run (GET /health lists them).
    work_kinds: list[WorkKind] = field(default_factory=list)
    # What /metrics counts (requests, settled tokens): this process's, or the cluster's in Redis.
    counts: Counts = field(default_factory=lambda: Counts(PROCESS_TALLY))
    # The `replica` label of the series this process keeps for itself (in flight, breakers, lines).
    replica: str = field(default_factory=replica_name)
    started_at: float = field(default_factory=time.time)
    # The App's mail (None keeps mail in the outbox) and the time that its sessions, links and
    # sign-in tries read, and the harvests' (their month, links, cancels): tests hand in a clock
    # of their own.
    mailer: Mailer | None = None
    clock: Callable[[], datetime] = utcnow
    # Told the kind of work just queued, so that a Runner claims it at once: in Serve a call on
    # the Runner's handle, beside the routes its doorbell (deployments/background/doorbell.py).
    # The Runner's poll is the fallback, so a nudge that is lost (or none, in a test) only
    # delays the work by one poll.
    wake_runner: Callable[[WorkKind], None] = no_runner_here

    def served_models(self) -> list[ModelSpec]:
        return list(self.catalog.models.values())

    def resolve_model(self, name: str | None) -> ModelSpec:
        model = self.catalog.resolve(name)
        if model is None:
            ids = ", ".join(self.catalog.models)
            raise errors.ModelNotFound(MODEL_NOT_FOUND.format(name=name, ids=ids), "model")
        note_model(model.id)  # the request's `model` label on /metrics
        return model


@dataclass(frozen=True)
class IngressReplica:
    """What the ingress's replica is built of (cluster/composition.py): the routes' services, and
    what the replica hosts beside them with its own life (deployments/resident.py): a colocated
    profile's engines and Runner, which run on the same services; nothing otherwise."""

    services: Services
    resident: Resident = field(default_factory=NoResident)
