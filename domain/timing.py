"""Where one request's time goes: a per-stage recorder, sent as `Server-Timing`.

The Server-Timing middleware (api/server_timing.py) gives each timed request
(POST /v1/completions) a `Timings` in a contextvar (`recording`); the code on
the path marks its stages with `stage(name)`, a context manager that costs a
few microseconds (and nothing but a contextvar read outside a timed request:
background work records nothing). The header goes out with the answer's first
bytes, in the W3C Server-Timing syntax, durations in milliseconds:

    Server-Timing: proxy;dur=1.2, auth;dur=0.41, body;dur=0.1, validate;dur=1.2, line;dur=0.05,
                   hold;dur=3.1, engine;dur=812.4, vllm;dur=809.0, queue;dur=0.3, prefill;dur=20.1,
                   decode;dur=788.0, settle;dur=2.2, serialize;dur=0.3, gzip;dur=0.1, total;dur=830.9

The stages of the ingress, each counted once (a stage nested in another is
left out of the outer one), so together they are at most `total`:

- proxy: from Serve's HTTP proxy receiving the request (cluster/proxy_middleware.py
  stamps its wall time in `x-acs-proxy-start`) to the Server-Timing middleware
  starting in the ingress. Two processes' wall clocks: the same clock on one machine, but on
  a cluster the proxy's node and the ingress's node may disagree. Absent without
  the proxy (in-process tests, benches).
- auth: the API key check and the key's rate-limit bucket.
- body: reading and parsing the JSON body.
- validate: strict validation, the model's facts, token counting with the
  model's tokenizer and the plan (in a worker thread: the hop counts here).
- stop: the spend stop's check (a ledger read at most once a second).
- idempotency: the Idempotency-Key's claim (only with the header).
- line: the key's line and the model's in-flight place.
- hold: the Hold's ledger transaction.
- engine: the engine call through the DeploymentHandle, from the request to
  the last output (a stream: to its first output, when the header goes out).
- assemble: turning the engine's outputs into the answer's choices.
- settle: the Hold's settlement (its ledger transaction).
- serialize: the Completion object and its JSON rendering.
- gzip: compressing the answer (when the client accepts gzip and it is 500 bytes or more).
- total: from the middleware's start to the header going out, plus proxy.

The engine's own figures, parts of `engine`, measured in the model replica and
carried back on `EngineOutput.timing` (deployments/engine.py):

- vllm: from our engine wrapper's call of AsyncLLM.generate to the output
  (engine - vllm: the handle's hops, pickling and Serve's queues).
- queue, prefill, decode: vLLM's own RequestStateStats (EngineCore clock):
  QUEUED to SCHEDULED, SCHEDULED to the first token, first to last token.
  When vLLM keeps no stats (`disable_log_stats`), the wrapper's own clock
  instead: prefill = to the first output (queue included), decode = the rest,
  and no queue.

A request with several prompts reports the slowest one's engine figures.

Streams: the header goes out with the first event, so it holds only the
stages before it: auth, body, validate, line, hold, and the engine to its first
output with vllm, queue and prefill; never settle, serialize or decode.
"""
from __future__ import annotations

import contextlib
import contextvars
import time
from typing import Iterator

ENGINE_STAGES = ("vllm", "queue", "prefill", "decode")

_current: contextvars.ContextVar[Timings | None] = contextvars.ContextVar("acs_timings", default=None)


class Timings:
    """One request's stage durations (seconds), in the order first seen."""

    __slots__ = ("started", "durations", "_open")

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.durations: dict[str, float] = {}
        self._open: list[list[float]] = []  # each open stage's time taken by its nested stages

    def add(self, name: str, seconds: float) -> None:
        self.durations[name] = self.durations.get(name, 0.0) + max(seconds, 0.0)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        inner = [0.0]
        self._open.append(inner)
        start = time.perf_counter()
        try:
            yield
        finally:
            spent = time.perf_counter() - start
            self._open.pop()
            if self._open:
                self._open[-1][0] += spent
            self.add(name, spent - inner[0])

    def engine(self, timing: dict[str, float] | None) -> None:
        """The engine's figures of one output; the slowest prompt's stand."""
        for name, seconds in (timing or {}).items():
            if name in ENGINE_STAGES and seconds >= self.durations.get(name, 0.0):
                self.durations[name] = max(float(seconds), 0.0)

    def header(self) -> str:
        total = time.perf_counter() - self.started + self.durations.get("proxy", 0.0)
        parts = [f"{name};dur={seconds * 1000:.2f}" for name, seconds in self.durations.items()]
        return ", ".join([*parts, f"total;dur={total * 1000:.2f}"])


def current() -> Timings | None:
    return _current.get()


@contextlib.contextmanager
def recording(timings: Timings) -> Iterator[Timings]:
    """`timings` records the stages of the code in the block (one request's)."""
    token = _current.set(timings)
    try:
        yield timings
    finally:
        _current.reset(token)


def stage(name: str) -> contextlib.AbstractContextManager[None]:
    """Time a stage of the current request; nothing outside a timed request."""
    timings = _current.get()
    return contextlib.nullcontext() if timings is None else timings.stage(name)


def engine_timing(timing: dict[str, float] | None) -> None:
    timings = _current.get()
    if timings is not None and timing:
        timings.engine(timing)


def parse(header: str) -> dict[str, float]:
    """A Server-Timing value as {name: milliseconds} (benches and tests read it)."""
    out: dict[str, float] = {}
    for item in header.split(","):
        name, *params = [p.strip() for p in item.split(";")]
        for param in params:
            key, _, value = param.partition("=")
            if key.strip() == "dur":
                out[name] = float(value)
    return out
