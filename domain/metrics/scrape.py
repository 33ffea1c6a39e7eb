"""One scrape's registry: the counted series' totals, and the values read at the scrape.

The totals come from the process's `Counts` (this process's, or the cluster's in Redis).
A collector builds the rest fresh for each scrape, so a gauge never drifts from what it
shows: the models' gateways and the lines of this replica (labelled `replica`), and the
ledger's counts, read at most every `max_age_s` whatever the scrape rate.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from domain.metrics.line import RUNNING, WAITING, MeteredKeyLine
from ledger.store.coltypes import utcnow
from ledger.tokens.gauges import LedgerGauges, read_gauges
from ledger.tokens.tables import UsageSource
from ledger.work.tables import WorkKind, WorkStatus

log = logging.getLogger("acs.metrics")
BREAKER_STATES = {"closed": 0, "half_open": 1, "open": 2}


class LedgerReadings:
    """The ledger's counts, read once per `max_age_s` by whichever scrape comes first."""

    def __init__(self, sessions: Any, max_age_s: float, timeout_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.sessions, self.max_age_s, self.timeout_s, self.clock = sessions, max_age_s, timeout_s, clock
        self._lock = asyncio.Lock()
        self._read_at: float | None = None
        self._latest: LedgerGauges | None = None

    def _fresh(self) -> bool:
        return self._read_at is not None and self.clock() - self._read_at < self.max_age_s

    async def latest(self) -> LedgerGauges | None:
        """None when the ledger did not answer in time (a failure is kept as long as a reading)."""
        async with self._lock:  # scrapes at once share one read
            if not self._fresh():
                self._latest = await self._read()
                self._read_at = self.clock()
        return self._latest

    async def _read(self) -> LedgerGauges | None:
        try:
            async with asyncio.timeout(self.timeout_s):
                async with self.sessions() as session:
                    return await read_gauges(session, utcnow())
        except Exception:  # noqa: BLE001 - a scrape shows the failure (acs_ledger_read_ok 0) and goes on
            log.warning("GET /metrics could not read the ledger", exc_info=True)
            return None


class CountedSeries(Collector):
    """The counted series' totals (`Counts.families`), inside a scrape's registry."""

    def __init__(self, families: list[Metric] | None) -> None:
        self.families = families or []

    def collect(self) -> Iterable[Metric]:
        return self.families


class ScrapeCollector(Collector):
    def __init__(self, services: Any, ledger: LedgerGauges | None, counted_ok: bool) -> None:
        self.services, self.ledger, self.counted_ok = services, ledger, counted_ok

    def collect(self) -> Iterator[Metric]:
        if self.services.counts.shared:
            yield GaugeMetricFamily("acs_cluster_counts_read_ok", "1 when this scrape read the cluster's counts "
                                    "from Redis, 0 when Redis did not answer (they are left out).",
                                    value=int(self.counted_ok))
        yield from self._gateways()
        yield from self._lines()
        yield from self._ledger()

    def _gateways(self) -> Iterator[Metric]:
        labels = ["model", "replica"]
        in_flight = GaugeMetricFamily("acs_in_flight", "Requests this replica has in flight to each model.",
                                      labels=labels)
        limit = GaugeMetricFamily("acs_in_flight_limit", "The most requests this replica sends each model at once "
                                  "(503 past it).", labels=labels)
        state = GaugeMetricFamily("acs_breaker_state", "This replica's circuit breaker of each model: 0 closed, "
                                  "1 half-open, 2 open.", labels=labels)
        failures = GaugeMetricFamily("acs_breaker_failures", "Inference's failures in a row, per model, as this "
                                     "replica saw them.", labels=labels)
        replica = self.services.replica
        for model_id, gateway in sorted(self.services.gateways.items()):
            in_flight.add_metric([model_id, replica], gateway.in_flight)
            limit.add_metric([model_id, replica], gateway.max_in_flight)
            state.add_metric([model_id, replica], BREAKER_STATES[gateway.breaker.state])
            failures.add_metric([model_id, replica], gateway.breaker.consecutive_failures)
        yield from (in_flight, limit, state, failures)

    def _lines(self) -> Iterator[Metric]:
        line = self.services.traffic.key_line
        if not isinstance(line, MeteredKeyLine):
            return
        labels, replica = ["state", "replica"], self.services.replica
        total = GaugeMetricFamily("acs_line_requests", "This replica's Completions in the per-key lines.",
                                  labels=labels)
        longest = GaugeMetricFamily("acs_line_longest", "The most Completions of one key in that state at this "
                                    "replica (16 run at most, 64 wait).", labels=labels)
        for state in (WAITING, RUNNING):
            total.add_metric([state, replica], line.total(state))
            longest.add_metric([state, replica], line.longest(state))
        yield from (total, longest)

    def _ledger(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("acs_ledger_read_ok", "1 when this scrape read the ledger's counts, 0 when the "
                                "ledger did not answer (its series are left out).", value=int(self.ledger is not None))
        ledger = self.ledger
        if ledger is None:
            return
        yield self._holds(ledger)
        yield self._work(ledger)
        yield from self._harvests(ledger)
        yield GaugeMetricFamily("acs_gpu_spend_usd_24h", "The GPU spend of the last 24 hours, in US dollars.",
                                value=ledger.spend_24h_usd)
        yield GaugeMetricFamily("acs_spend_stop_locked", "1 while the spend stop holds back new GPU work.",
                                value=int(ledger.spend_stop_locked))

    def _model_ids(self, seen: Iterable[str]) -> list[str]:
        """Every served model (0 when idle, so a panel's line does not vanish), and any other the ledger names."""
        return sorted(set(self.services.catalog.models) | set(seen))

    def _holds(self, ledger: LedgerGauges) -> Metric:
        holds = ledger.holds_running
        family = GaugeMetricFamily("acs_holds_running", "Holds not ended yet: requests and work that hold tokens.",
                                   labels=["model", "source"])
        for model in self._model_ids(model for model, _ in holds):
            for source in UsageSource:
                family.add_metric([model, source.value], holds.get((model, source.value), 0))
        return family

    def _work(self, ledger: LedgerGauges) -> Metric:
        family = GaugeMetricFamily("acs_work", "Rows of background work by kind and status.",
                                   labels=["kind", "status"])
        for kind in WorkKind:
            for status in WorkStatus:
                family.add_metric([kind.value, status.value], ledger.work.get((kind.value, status.value), 0))
        return family

    def _harvests(self, ledger: LedgerGauges) -> Iterator[Metric]:
        progress = ledger.harvest_prompts
        total = GaugeMetricFamily("acs_harvest_prompts", "Prompts of the running harvests.", labels=["model"])
        done = GaugeMetricFamily("acs_harvest_prompts_done", "Prompts the running harvests have done.",
                                 labels=["model"])
        for model in self._model_ids(progress):
            model_done, model_total = progress.get(model, (0, 0))
            total.add_metric([model], model_total)
            done.add_metric([model], model_done)
        yield from (total, done)


def scrape_registry(services: Any, counted: list[Metric] | None, ledger: LedgerGauges | None) -> CollectorRegistry:
    """`counted` None: the cluster's counts could not be read; `ledger` None: the ledger's."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CountedSeries(counted))
    registry.register(ScrapeCollector(services, ledger, counted_ok=counted is not None))
    return registry
