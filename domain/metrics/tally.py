"""Where the counted series (`series.COUNTED`) add up: the contract, and this process's tally.

`ProcessTally` is the embedded default's: one process answers every request and every
scrape, so its own registry is the whole count. With several processes (ingress
replicas, the Runner) `tally_redis.RedisTally` keeps the cluster's count instead.
"""
from __future__ import annotations

from typing import Protocol, Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import Metric

from domain.metrics.series import COUNTED, CounterSeries, HistogramSeries

# A `_created` sample beside each counter and histogram doubles the series for nothing a dashboard reads.
disable_created_metrics()


class Tally(Protocol):
    """Adds never await: a request does not wait for its count."""

    def inc(self, series: CounterSeries, labels: Sequence[str], amount: float) -> None: ...

    def observe(self, series: HistogramSeries, labels: Sequence[str], value: float) -> None: ...

    async def flush(self) -> None:
        """What this process counted reaches where the totals are read."""
        ...

    async def families(self) -> list[Metric] | None:
        """The totals for a scrape; None when they could not be read."""
        ...

    async def aclose(self) -> None: ...


class ProcessTally:
    """prometheus_client's counters and histograms, in one registry per process."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._counters: dict[str, Counter] = {}
        self._histograms: dict[str, Histogram] = {}
        for series in COUNTED:
            if isinstance(series, CounterSeries):
                self._counters[series.name] = Counter(series.name, series.doc, series.labels, registry=self.registry)
            else:
                self._histograms[series.name] = Histogram(series.name, series.doc, series.labels,
                                                          buckets=series.buckets, registry=self.registry)

    def inc(self, series: CounterSeries, labels: Sequence[str], amount: float) -> None:
        self._counters[series.name].labels(*labels).inc(amount)

    def observe(self, series: HistogramSeries, labels: Sequence[str], value: float) -> None:
        self._histograms[series.name].labels(*labels).observe(value)

    async def flush(self) -> None:
        pass  # the registry is where scrapes read

    async def families(self) -> list[Metric] | None:
        return list(self.registry.collect())

    async def aclose(self) -> None:
        pass


# Every app of the process adds to one tally (the tests build several, and a Runner beside them).
PROCESS_TALLY = ProcessTally()
