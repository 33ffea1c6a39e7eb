"""The cluster's counts in Redis: every process adds its own, any scrape reads the totals.

Each ingress replica and the Runner replica keep a small buffer of increments and flush
it every `flush_s` (and the answering replica at each scrape) in one MULTI of
HINCRBYFLOAT (`redis_layout`). A request only adds to the buffer, so it never waits on
Redis, and a flush that Redis does not take never fails one: its updates are counted in
`acs_metrics_lost_total{series}`, which stays in the buffer until Redis takes it.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter, defaultdict
from typing import Any, Sequence

from prometheus_client.core import Metric

from domain.metrics.redis_layout import SUM, bound_of, family_of, field_of, key_of
from domain.metrics.series import COUNTED, CounterSeries, HistogramSeries, Series

log = logging.getLogger("acs.metrics")

LOST = CounterSeries(
    "acs_metrics_lost",
    "Updates that never reached Redis (it did not take their flush), by series: an answer is one in each of its "
    "series, a settled Hold two in acs_tokens (in, out). The requests themselves were answered.",
    ("series",))


class RedisTally:
    def __init__(self, client: Any, *, prefix: str, flush_s: float = 1.0, timeout_s: float = 2.0,
                 series: Sequence[Series] = COUNTED) -> None:
        self.client, self.prefix, self.flush_s, self.timeout_s = client, prefix, flush_s, timeout_s
        self.series = (*series, LOST)
        self._pending: defaultdict[tuple[str, str], float] = defaultdict(float)  # (key, field) -> amount
        self._updates: Counter[str] = Counter()  # series name -> adds in the buffer, for the lost count
        self._flush_lock = asyncio.Lock()  # a scrape's flush waits for one under way, so it reads it
        self._flusher: asyncio.Task | None = None

    def inc(self, series: CounterSeries, labels: Sequence[str], amount: float) -> None:
        self._add(series, field_of(*labels), amount)
        self._updates[series.name] += 1

    def observe(self, series: HistogramSeries, labels: Sequence[str], value: float) -> None:
        self._add(series, field_of(bound_of(series, value), *labels), 1)
        self._add(series, field_of(SUM, *labels), value)
        self._updates[series.name] += 1

    async def flush(self) -> None:
        async with self._flush_lock:
            batch, updates = self._pending, self._updates
            self._pending, self._updates = defaultdict(float), Counter()
            if not batch:
                return
            try:
                async with asyncio.timeout(self.timeout_s):
                    # MULTI: the batch lands whole or not at all, so none of it is counted twice or half.
                    async with self.client.pipeline(transaction=True) as pipe:
                        for (key, field), amount in batch.items():
                            pipe.hincrbyfloat(key, field, amount)
                        await pipe.execute()
            except Exception:  # noqa: BLE001 - the counts are lost, the requests they counted are not
                log.warning("Redis did not take %d metric updates", sum(updates.values()), exc_info=True)
                self._count_lost(batch, updates)

    async def families(self) -> list[Metric] | None:
        await self.flush()  # this replica's last second is in the answer too
        try:
            async with asyncio.timeout(self.timeout_s):
                async with self.client.pipeline(transaction=False) as pipe:
                    for series in self.series:
                        pipe.hgetall(key_of(self.prefix, series))
                    hashes = await pipe.execute()
        except Exception:  # noqa: BLE001 - a scrape shows the failure (acs_cluster_counts_read_ok 0) and goes on
            log.warning("GET /metrics could not read the cluster's counts from Redis", exc_info=True)
            return None
        return [family_of(series, fields) for series, fields in zip(self.series, hashes)]

    async def aclose(self) -> None:
        """Stop the flushes, after a last one. The client is the caller's (shared with the traffic's)."""
        if self._flusher is not None:
            async with self._flush_lock:  # not in the middle of a flush: its batch would go uncounted
                self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        await self.flush()

    def _add(self, series: Series, field: str, amount: float) -> None:
        self._pending[(key_of(self.prefix, series), field)] += amount
        self._keep_flushing()

    def _keep_flushing(self) -> None:
        if self._flusher is not None and not self._flusher.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # counted outside an event loop: the next flush (a scrape's) takes it
        self._flusher = loop.create_task(self._flush_every(), name="acs-metrics-flush")

    async def _flush_every(self) -> None:
        while True:
            await asyncio.sleep(self.flush_s)
            await self.flush()

    def _count_lost(self, batch: dict[tuple[str, str], float], updates: Counter[str]) -> None:
        lost_key = key_of(self.prefix, LOST)
        for (key, field), amount in batch.items():
            if key == lost_key:
                self._pending[(key, field)] += amount  # the lost count waits for Redis: it is the record
        for name, count in updates.items():
            self._pending[(lost_key, field_of(name))] += count
