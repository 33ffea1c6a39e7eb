"""How the cluster's counts lie in Redis: one hash per series, a field per label set.

- a counter's field is its label values, as a JSON list: `["POST","/v1/completions","200","tiny-llama"]`;
- a histogram's fields put the part first: `["0.25", <labels>]` counts the observations in that
  bucket alone (above the bound before it; "+Inf" past the last bound), and `["sum", <labels>]`
  adds up the values. A scrape makes the buckets cumulative and takes the count from "+Inf",
  so an observation costs two increments, not one per bucket.

Every key carries one hash tag (`{counts}`), so the increments of one flush, a MULTI over
several keys, stay in one Redis Cluster slot.
"""
from __future__ import annotations

import bisect
import json
import math
from collections import defaultdict
from typing import Mapping, Sequence

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from domain.metrics.series import CounterSeries, HistogramSeries, Series

SUM = "sum"


def key_of(prefix: str, series: Series) -> str:
    return f"{prefix}{{counts}}:{series.name}"


def field_of(*parts: str) -> str:
    return json.dumps(list(parts), ensure_ascii=False, separators=(",", ":"))


def bound_of(series: HistogramSeries, value: float) -> str:
    """The `le` of the one bucket that takes `value`, written as Prometheus writes it."""
    index = bisect.bisect_left(series.buckets, value)  # a value on a bound belongs to that bound's bucket
    return floatToGoString(series.buckets[index] if index < len(series.buckets) else math.inf)


def counter_family(series: CounterSeries, fields: Mapping[bytes, bytes]) -> Metric:
    family = CounterMetricFamily(series.name, series.doc, labels=series.labels)
    for labels, value in sorted((json.loads(field), float(value)) for field, value in fields.items()):
        family.add_metric(labels, value)
    return family


def histogram_family(series: HistogramSeries, fields: Mapping[bytes, bytes]) -> Metric:
    bounds = [floatToGoString(bound) for bound in (*series.buckets, math.inf)]
    counts: dict[tuple[str, ...], dict[str, float]] = defaultdict(dict)
    sums: dict[tuple[str, ...], float] = defaultdict(float)
    for field, value in fields.items():
        part, *labels = json.loads(field)
        if part == SUM:
            sums[tuple(labels)] += float(value)
        elif part in bounds:  # a bound no longer configured is left out
            counts[tuple(labels)][part] = float(value)
    family = HistogramMetricFamily(series.name, series.doc, labels=series.labels)
    for labels in sorted(counts.keys() | sums.keys()):
        family.add_metric(list(labels), _cumulative(bounds, counts[labels]), sum_value=sums[labels])
    return family


def _cumulative(bounds: Sequence[str], counts: Mapping[str, float]) -> list[tuple[str, float]]:
    running, buckets = 0.0, []
    for bound in bounds:
        running += counts.get(bound, 0.0)
        buckets.append((bound, running))
    return buckets


def family_of(series: Series, fields: Mapping[bytes, bytes]) -> Metric:
    if isinstance(series, CounterSeries):
        return counter_family(series, fields)
    return histogram_family(series, fields)
