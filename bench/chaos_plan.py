"""The pure parts of the chaos soak (bench/chaos.py): the kill schedule drawn from a seed, how a
stream ended, whether an error answer is the spec's error object, and the figures' summaries.
Nothing here does I/O, so tests/unit/test_bench_chaos.py checks it all."""
from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

# The faults of issue 38, each a kind of the soak's kills.
FAULT_KINDS: tuple[str, ...] = (
    "ingress",  # kill -9 of one of the two ingress replicas
    "model",  # kill -9 of a model deployment's replica
    "runner",  # kill -9 of the Runner's replica
    "harvest",  # kill -9 of the harvest model host, or of a harvest run's actor
    "raylet",  # kill -9 of a worker node's raylet (the whole node's processes go with it)
    "postgres",  # pg_terminate_backend of the platform's connections
    "redis",  # Redis restarted, or its clients' connections killed
)

# The spec's error object (openapi.json's ErrorObject): these keys are required, no others allowed.
ERROR_REQUIRED = ("message", "type", "param", "code")
ERROR_ALLOWED = frozenset(ERROR_REQUIRED + ("retryable", "retry_after_seconds", "upstream_status", "request_id"))
REQUEST_ID = re.compile(r"[\w-]{1,64}")
ERROR_TYPES = frozenset(("invalid_request_error", "rate_limit_error", "upstream_error", "service_unavailable",
                         "internal_error"))


@dataclass(frozen=True)
class Kill:
    at_s: float  # seconds after the soak's start
    kind: str


def kill_schedule(seed: int, duration_s: float, kills: int, kinds: Sequence[str] = FAULT_KINDS,
                  margin_s: float | None = None) -> list[Kill]:
    """`kills` faults at random moments of the soak, the same for the same seed. Each kind gets
    its share (kills // len(kinds), the rest to kinds drawn at random), so that a short run still
    has each kind; the moments are uniform in [margin, duration - margin], the first margin
    leaving the traffic time to start and the last the work time to be under way."""
    if kills < 0 or duration_s <= 0:
        raise ValueError("kills must be >= 0 and the duration > 0")
    rng = random.Random(seed)
    margin = min(duration_s / 10, 20.0) if margin_s is None else margin_s
    share, rest = divmod(kills, len(kinds))
    drawn = [kind for kind in kinds for _ in range(share)] + rng.sample(list(kinds), rest)
    rng.shuffle(drawn)
    moments = sorted(rng.uniform(margin, duration_s - margin) for _ in drawn)
    return [Kill(round(at, 3), kind) for at, kind in zip(moments, drawn)]


# -- a stream's end ------------------------------------------------------------------------------
DONE = "done"  # [DONE], every choice with its finish_reason, no error event
ERROR_EVENT = "error_event"  # an error event (the spec's error object) before [DONE] or the end
CONNECTION_END = "connection_end"  # the connection broke before [DONE] (a reset, a cut chunk)
# The violations: a stream that looks complete but is not, or that ends cleanly with nothing said.
DONE_INCOMPLETE = "done_incomplete"  # [DONE] while a choice had no finish_reason, and no error event
SILENT_END = "silent_end"  # the body ended cleanly without [DONE] and without an error event
BAD_ERROR_EVENT = "bad_error_event"  # an error event that is not the spec's error object
STREAM_OK = frozenset((DONE, ERROR_EVENT, CONNECTION_END))


def stream_end(events: Iterable[str], broke: bool) -> str:
    """How a streamed Completion ended, from its `data:` payloads in order and whether the
    connection broke (a transport error while reading). Only the ends in STREAM_OK are allowed:
    the spec's "A cut stream therefore never looks complete"."""
    finished: dict[int, bool] = {}
    error: Any = None
    done = False
    for data in events:
        if data == "[DONE]":
            done = True
            break
        try:
            chunk = json.loads(data)
        except ValueError:
            return BAD_ERROR_EVENT if error is None else ERROR_EVENT
        if isinstance(chunk, dict) and "error" in chunk:
            error = chunk
            continue
        for choice in chunk.get("choices", ()) if isinstance(chunk, dict) else ():
            index = choice.get("index", 0)
            finished[index] = finished.get(index, False) or choice.get("finish_reason") is not None
    if error is not None:
        return ERROR_EVENT if error_object_problem(error, in_stream=True) is None else BAD_ERROR_EVENT
    if done:
        return DONE if finished and all(finished.values()) else DONE_INCOMPLETE
    return CONNECTION_END if broke else SILENT_END


def error_object_problem(body: Any, in_stream: bool = False) -> str | None:
    """None when `body` is the spec's error answer (openapi.json's ErrorResponse: {"error": the
    error object, "request_id": ...}, nothing else; "The error object" in the docs); otherwise what
    is wrong with it. A stream's error event has the id in `error.request_id` too."""
    if not isinstance(body, dict) or set(body) != {"error", "request_id"} or not isinstance(body["error"], dict):
        return 'not {"error": {...}, "request_id": ...}'
    if not isinstance(body["request_id"], str) or not REQUEST_ID.fullmatch(body["request_id"]):
        return f"request_id {body['request_id']!r} is not a request id"
    error = body["error"]
    missing = [key for key in ERROR_REQUIRED + (("request_id",) if in_stream else ()) if key not in error]
    if missing:
        return f"missing error.{', error.'.join(missing)}"
    extra = sorted(set(error) - ERROR_ALLOWED)
    if extra:
        return f"keys the spec does not have: error.{', error.'.join(extra)}"
    if error["type"] not in ERROR_TYPES:
        return f"type {error['type']!r} is not one of the spec's"
    if not isinstance(error["message"], str) or not error["message"]:
        return "no message"
    if in_stream and error["request_id"] != body["request_id"]:
        return "error.request_id is not the request_id"
    return None


def answer_problem(status: int, body_text: str) -> str | None:
    """The client-side check of every answer that is not a success: its body must be the
    spec's error object (a 5xx above all: issue 38's "no 500 that is not the spec's error
    object"). None when it is."""
    if status < 400:
        return None
    try:
        body = json.loads(body_text)
    except ValueError:
        return f"{status} with a body that is not JSON: {body_text[:120]!r}"
    problem = error_object_problem(body)
    return None if problem is None else f"{status}: {problem}"


# -- figures -------------------------------------------------------------------------------------
def quantile(values: Sequence[float], q: float) -> float | None:
    """The q-quantile by linear interpolation, None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    at = q * (len(ordered) - 1)
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def recovery_figures(recoveries: dict[str, list[float | None]]) -> dict[str, dict[str, Any]]:
    """Per kind: kills, how many recovered within the wait, p50 and max seconds (of those)."""
    out = {}
    for kind, times in recoveries.items():
        done = [t for t in times if t is not None]
        p50 = quantile(done, 0.5)
        out[kind] = {"kills": len(times), "recovered": len(done),
                     "p50_s": None if p50 is None else round(p50, 2),
                     "max_s": round(max(done), 2) if done else None}
    return out
