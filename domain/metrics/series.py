"""The series counted as requests come and go, declared once for both tallies.

The rest are read at a scrape (`scrape`). `tally.ProcessTally` keeps these in this
process (the embedded default's one ingress); `tally_redis.RedisTally` adds them up in
Redis for the whole cluster, so every ingress replica answers a scrape with the same totals.
"""
from __future__ import annotations

from dataclasses import dataclass

# From a refusal (milliseconds) to the API's longest wait for Inference (14 minutes).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 150.0, 300.0, 900.0)
REQUEST_LABELS = ("method", "route", "status", "model")


@dataclass(frozen=True)
class CounterSeries:
    name: str  # without `_total`: Prometheus's client and the exposition add it
    doc: str
    labels: tuple[str, ...]


@dataclass(frozen=True)
class HistogramSeries:
    name: str
    doc: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...]  # the upper bounds; +Inf comes after them


Series = CounterSeries | HistogramSeries

REQUESTS = CounterSeries(
    "acs_requests", "HTTP answers of the ingress by route template, status and served model.", REQUEST_LABELS)
DURATION = HistogramSeries(
    "acs_request_duration_seconds", "Seconds from a request's start to its answer's last byte (a stream's whole life).",
    REQUEST_LABELS, LATENCY_BUCKETS)
FIRST_BYTE = HistogramSeries(
    "acs_request_first_byte_seconds",
    "Seconds from a request's start to its status line (a stream's: when Inference started its answer).",
    REQUEST_LABELS, LATENCY_BUCKETS)
TOKENS = CounterSeries(
    "acs_tokens",
    "Tokens charged when a Hold settled (Completions, Jobs, Loom Nodes, harvests): in, its prompts; out, what "
    "it generated (a Hold paid whole counts the tokens it held).",
    ("model", "source", "direction"))

COUNTED: tuple[Series, ...] = (REQUESTS, DURATION, FIRST_BYTE, TOKENS)
