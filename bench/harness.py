"""What the benches of background streams share (bench/loom.py, bench/playground.py): the
platform in one process over the real engine, a client that notes when each engine output
came, plain streamed Completions, and the time from an engine output to the stream event
that shows its text.

One process holds the whole platform but Ray: the FastAPI app served by uvicorn on
127.0.0.1, the ledger (a fresh SQLite file, the embedded default's, unless `--database-url`
names another), a Runner with every kind, and the real engine (`VllmEngine`, vLLM with
vllm-lens) on the embedded default model. Every side reaches the engine through the same
`TimedClient`. The streams are pushed through the feed of the process (the embedded
default's), or through Redis pub/sub with `--redis-url` (as across a cluster's replicas).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.completions_overhead import percentile  # noqa: E402

PROMPT = "The old lighthouse keeper climbed the stairs one last time, and at the top he saw"
OTHER_CPU_WARN = 0.10


# -- the engine's side: when each output left it ------------------------------------------------
@dataclass
class Output:
    at: float  # time.time() when the engine's output reached our client
    tokens: int  # generated tokens so far
    text: str  # generated text so far


class TimedClient:
    """The in-process engine client, noting each output of each engine request."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.outputs: dict[str, list[Output]] = {}

    async def generate(self, request: Any) -> AsyncIterator[Any]:
        seen = self.outputs.setdefault(request.request_id, [])
        tokens, text = 0, ""
        outputs = self.inner.generate(request)
        try:
            async for output in outputs:
                for choice in output.choices:  # n = 1 on every side: one choice per engine request
                    tokens += len(choice.token_ids)
                    text += choice.text
                seen.append(Output(time.time(), tokens, text))
                yield output
        finally:
            await outputs.aclose()  # a stream closed early stops the engine's request too

    async def abort(self, request_id: str) -> None:
        await self.inner.abort(request_id)

    async def state(self) -> Any:
        return await self.inner.state()

    def of(self, request_id_part: str) -> list[Output]:
        """The outputs of the one engine request whose id holds `request_id_part`."""
        (outputs,) = [seen for rid, seen in self.outputs.items() if request_id_part in rid]
        return outputs


def engine_times(outputs: list[list[Output]], start: float) -> dict[str, float]:
    """When the engine's first and last outputs came, from `start`, and how far apart the
    requests' first outputs were (requests that start apart share fewer of the engine's steps)."""
    firsts, lasts = [seen[0].at for seen in outputs], [seen[-1].at for seen in outputs]
    return {"first_token_s": min(firsts) - start, "first_token_spread_s": max(firsts) - min(firsts),
            "last_token_s": max(lasts) - start}


# -- a stream's events, and how long each token took to reach one ---------------------------------
@dataclass
class Seen:
    """A stream event at the client: when it came, and the text that it shows of one request."""

    at: float
    text: str


def token_to_event(outputs: list[Output], events: Sequence[Seen]) -> list[float]:
    """For each token: seconds from the engine's output that carried it to the first stream
    event whose text holds it. A token that added no text (part of a character) is skipped."""
    latencies, tokens_before, text_before = [], 0, ""
    for output in outputs:
        new_tokens = output.tokens - tokens_before
        if output.text != text_before:
            seen = next(e.at for e in events if e.text.startswith(output.text))
            latencies += [seen - output.at] * new_tokens
        tokens_before, text_before = output.tokens, output.text
    return latencies


def latency_ms(latencies: list[float]) -> dict[str, float]:
    """p50, p95, max and mean in milliseconds, and how many tokens."""
    ms = [1000 * x for x in latencies]
    return {"p50": percentile(ms, 0.5), "p95": percentile(ms, 0.95), "max": max(ms),
            "mean": statistics.fmean(ms), "tokens": len(ms)}


def ms(seconds: float) -> str:
    return f"{1000 * seconds:.0f} ms"


async def sse_data(response: Any, what: str) -> AsyncIterator[tuple[float, Any]]:
    """Each `data:` of an SSE answer, parsed, with the time it came, until `[DONE]`."""
    if response.status_code != 200:
        raise RuntimeError(f"{what}: HTTP {response.status_code}: {(await response.aread())[:500]!r}")
    async for line in response.aiter_lines():
        if not line.startswith("data: "):
            continue
        at, data = time.time(), line[len("data: "):]
        if data == "[DONE]":
            return
        yield at, json.loads(data)
    raise RuntimeError(f"{what} ended without [DONE]")


@dataclass
class PlainStream:
    request_id: str
    done_at: float  # when [DONE] came
    text: str
    events: list[Seen] = field(repr=False)  # each event, with the text so far


async def plain_stream(http: Any, body: dict) -> PlainStream:
    """One streamed `POST /v1/completions` (n 1) read to its [DONE]."""
    text, events = "", []
    async with http.stream("POST", "/v1/completions", json=body) as response:
        async for at, chunk in sse_data(response, "plain stream"):
            if "error" in chunk:
                raise RuntimeError(f"plain stream failed: {chunk}")
            text += "".join(choice["text"] for choice in chunk["choices"])
            events.append(Seen(at, text))
        return PlainStream(response.headers["x-request-id"], time.time(), text, events)


def completion_bodies(args: argparse.Namespace, n: int, seed: int) -> list[dict[str, Any]]:
    """The n streamed requests of a side: request i samples with seed + i."""
    return [{"model": args.model, "prompt": PROMPT, "max_tokens": args.max_tokens, "seed": seed + i,
             "stream": True} for i in range(n)]


# -- the stack in this process -------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stack:
    """The app behind uvicorn, a Runner of every kind, the real engine, a fresh ledger, and a
    User with an API key (`key`)."""

    def __init__(self, args: argparse.Namespace, tmp: Path, wrap_app: Callable[[Any], Any] | None = None) -> None:
        self.args, self.tmp, self.wrap_app = args, tmp, wrap_app
        self.database_url = args.database_url or f"sqlite+aiosqlite:///{tmp / 'acs.db'}"

    async def start(self) -> None:
        import uvicorn

        from api.app import create_app
        from domain.inference.clients import LocalEngineClient
        from domain.settings import Settings
        from cluster.composition import services_with_runner
        from deployments.catalog import load_catalog
        from deployments.vllm_engine import VllmEngine
        from ledger.store.db import make_engine
        from ledger.store.migrate import upgrade

        await upgrade(self.database_url)
        settings = Settings(profile=self.args.profile, database_url=self.database_url, redis_url=self.args.redis_url)
        catalog = load_catalog(self.args.profile, models_root=settings.models_dir)
        model = catalog.resolve(self.args.model)
        if model is None:
            raise SystemExit(f"no model {self.args.model!r} in the {self.args.profile} catalog")
        self.model = model
        print(f"[bench] loading {model.id} ({model.weights_path()})", flush=True)
        self.engine = VllmEngine(model.weights_path(), model.vllm_args(), cpu=True)
        self.client = TimedClient(LocalEngineClient(self.engine))
        self.db = make_engine(self.database_url)
        # The routes ring the Runner beside them when they queue work.
        self.services, self.runner = services_with_runner(settings, catalog, {model.id: self.client}, self.db)
        self.services.tokenizers.get(model)
        app = create_app()
        app.state.services = self.services
        self.runner.start()
        self.port = free_port()
        served = app if self.wrap_app is None else self.wrap_app(app)
        self.server = uvicorn.Server(uvicorn.Config(served, host="127.0.0.1", port=self.port, log_level="warning",
                                                    lifespan="off", access_log=False))
        self.serving = asyncio.create_task(self.server.serve())
        while not self.server.started:
            if self.serving.done():
                self.serving.result()
            await asyncio.sleep(0.05)
        self.user_id, self.key = await self._key()

    async def _key(self) -> tuple[uuid.UUID, str]:
        from ledger.accounts.keys import create_api_key, create_user

        async with self.services.ledger.write_sessions() as session:  # SQLite: the write lock at BEGIN
            user = await create_user(session, f"bench-{uuid.uuid4().hex[:8]}")
            _, raw = await create_api_key(session, user.id, "bench")
            await session.commit()
        return user.id, raw

    def http(self, connections: int, **kwargs: Any) -> Any:
        """A client of the app; with the API key unless `headers` says otherwise."""
        import httpx

        limits = httpx.Limits(max_connections=connections + 8, max_keepalive_connections=connections + 8)
        kwargs.setdefault("headers", {"Authorization": f"Bearer {self.key}"})
        return httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.port}", timeout=600, trust_env=False,
                                 limits=limits, **kwargs)

    async def stop(self) -> None:
        self.server.should_exit = True
        await asyncio.gather(self.serving, return_exceptions=True)
        await self.runner.stop()
        await self.services.feed.aclose()
        self.engine.shutdown()
        await self.db.dispose()


def add_stack_args(p: argparse.ArgumentParser) -> None:
    """The options of the stack and the workload that every bench here takes."""
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--profile", default="embedded", help="the catalog: embedded (SmolLM2-135M) or test (tiny)")
    p.add_argument("--model", default="smollm2-135m", help="the model, as a request names it")
    p.add_argument("--database-url", help="the ledger (default: a fresh SQLite file, the embedded default's)")
    p.add_argument("--redis-url", help="Redis for the feed (and the traffic limits), as a cluster has; "
                                       "default: none, the embedded default's feed in the process")
    p.add_argument("--json", type=Path, help="also write the figures here")


def stack_facts(stack: Stack) -> dict[str, Any]:
    """What the figures were measured on."""
    from sqlalchemy import make_url

    return {"model": stack.model.id, "database": make_url(stack.database_url).get_backend_name(),
            "feed": type(stack.services.feed).__name__, "catch_up_s": stack.services.settings.stream_catch_up_s,
            "cpus": os.cpu_count()}


def main_of(args: argparse.Namespace, name: str, measure: Callable[[Stack], Awaitable[dict[str, Any]]],
            print_report: Callable[[dict[str, Any]], None], wrap_app: Callable[[Any], Any] | None = None) -> int:
    """`measure` the Stack, started in a temp folder of its own (vLLM's sockets go there, not
    /tmp), into its figures; print them, and write them to `--json`. `wrap_app`: what uvicorn
    serves around the app (an ASGI middleware that watches it), if anything."""
    from cluster.ray_env import prepare_ray_environment
    from deployments.vllm_runtime import prepare_environment

    prepare_environment(cpu=True)
    prepare_ray_environment()

    async def run() -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix=f"acs-bench-{name}-") as tmp:
            os.environ["TMPDIR"] = os.environ["VLLM_RPC_BASE_PATH"] = tmp
            stack = Stack(args, Path(tmp), wrap_app)
            await stack.start()
            try:
                return await measure(stack)
            finally:
                await stack.stop()

    out = asyncio.run(run())
    print_report(out)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


def warn_other_cpu(share: float) -> None:
    print(f"other processes' CPU, the worst round: {share:.0%}")
    if share > OTHER_CPU_WARN:
        print(f"WARNING: other processes used over {OTHER_CPU_WARN:.0%} of the machine in a round: "
              "the figures are not a clean measurement")
