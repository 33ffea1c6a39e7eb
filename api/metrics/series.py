"""The series this process counts as requests come and go; the rest are read at a scrape (`scrape`)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics

# A `_created` sample beside each counter and histogram doubles the series for nothing a dashboard reads.
disable_created_metrics()

# One registry per process: every app of the process (the tests build several) adds to it.
PROCESS = CollectorRegistry()

# From a refusal (milliseconds) to the API's longest wait for Inference (14 minutes).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 150.0, 300.0, 900.0)
REQUEST_LABELS = ("method", "route", "status", "model")

REQUESTS = Counter(
    "acs_requests", "HTTP answers of this ingress by route template, status and served model.",
    REQUEST_LABELS, registry=PROCESS,
)
DURATION = Histogram(
    "acs_request_duration_seconds", "Seconds from a request's start to its answer's last byte (a stream's whole life).",
    REQUEST_LABELS, buckets=LATENCY_BUCKETS, registry=PROCESS,
)
FIRST_BYTE = Histogram(
    "acs_request_first_byte_seconds",
    "Seconds from a request's start to its status line (a stream's: when Inference started its answer).",
    REQUEST_LABELS, buckets=LATENCY_BUCKETS, registry=PROCESS,
)
TOKENS = Counter(
    "acs_tokens",
    "Tokens charged when a Completion's Hold settled: in, its prompts; out, what it generated "
    "(a Hold paid whole counts the tokens it held).",
    ("model", "source", "direction"), registry=PROCESS,
)


def observe_request(method: str, route: str, status: str, model: str,
                    first_byte_s: float | None, duration_s: float) -> None:
    labels = (method, route, status, model)
    REQUESTS.labels(*labels).inc()
    DURATION.labels(*labels).observe(duration_s)
    if first_byte_s is not None:
        FIRST_BYTE.labels(*labels).observe(first_byte_s)


def count_settled_tokens(model: str, source: str, prompt_tokens: int, used: int) -> None:
    """`used` is what the Hold settled to: the prompts and what came after them."""
    TOKENS.labels(model, source, "in").inc(min(prompt_tokens, used))
    TOKENS.labels(model, source, "out").inc(max(used - prompt_tokens, 0))
