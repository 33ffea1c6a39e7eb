"""A Loom Branch of n Nodes against n plain streamed Completions of the same path text.

    python bench/loom.py [--n 8] [--max-tokens 64] [--rounds 4] [--warmup 1]
        [--model smollm2-135m] [--database-url URL] [--redis-url URL] [--json out.json]

One process holds the whole platform but Ray: the FastAPI app served by
uvicorn on 127.0.0.1, the ledger (a fresh SQLite file, the embedded
default's, unless `--database-url` names another), a Runner with the Loom
Node kind, and the real engine (`VllmEngine`, vLLM with vllm-lens) on the
embedded default model. Both sides reach the engine through the same client,
which notes when each output left the engine. The Loom's stream is pushed
each Node's text through the feed of the process (the embedded default's),
or through Redis pub/sub with `--redis-url` (as across a cluster's replicas).

Each round runs both sides one after the other (their order alternates from
round to round), with the same seeds: plain stream i and Node i sample with
seed + i, the same max_tokens and the same prompt, the root of a new Loom.

- plain: n `POST /v1/completions` with `stream: true` at once; tokens per
  second = their completion tokens / (send to the last stream's [DONE]).
- Branch: `POST .../branch` with `n`; the Loom's stream is opened at its
  answer; tokens per second = the Nodes' completion tokens / (the Branch's
  answer to the last Node's end, its work row's `finished_at`). Everything the
  background path adds is inside: the Runner's claim, each Node's Hold, its
  text told to the feed and written to the ledger as it grows, and the
  stream's reads.
- token to event: for each token of each Node, the time from the engine's
  output that carried it to the first Loom stream event whose text holds it
  (p50 and p95 over all tokens of all timed rounds).

The goal: the Branch's tokens per second >= 0.9 of the plain streams'.
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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.completions_overhead import percentile  # noqa: E402
from bench.lens_overhead import OtherLoad  # noqa: E402
from cluster.ray_env import prepare_ray_environment  # noqa: E402
from deployments.vllm_runtime import prepare_environment  # noqa: E402

GOAL_RATIO = 0.9
OTHER_CPU_WARN = 0.10
PROMPT = "The old lighthouse keeper climbed the stairs one last time, and at the top he saw"


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
                for choice in output.choices:  # n = 1 on both sides: one choice per engine request
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


# -- one side of a round ----------------------------------------------------------------------------
@dataclass
class Side:
    name: str
    elapsed_s: float
    tokens: int
    tok_per_s: float
    texts: list[str] = field(repr=False)
    extra: dict[str, float] = field(default_factory=dict)


async def one_plain_stream(http: Any, body: dict) -> tuple[str, float, str]:
    """Its request id, when [DONE] came, and its text."""
    text = ""
    async with http.stream("POST", "/v1/completions", json=body) as response:
        if response.status_code != 200:
            raise RuntimeError(f"plain stream: HTTP {response.status_code}: {(await response.aread())[:500]!r}")
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            data = line[len("data: "):]
            if data == "[DONE]":
                return response.headers["x-request-id"], time.time(), text
            chunk = json.loads(data)
            if "error" in chunk:
                raise RuntimeError(f"plain stream failed: {chunk}")
            text += "".join(choice["text"] for choice in chunk["choices"])
    raise RuntimeError("plain stream ended without [DONE]")


async def plain_side(http: Any, client: TimedClient, args: argparse.Namespace, seed: int) -> Side:
    bodies = [{"model": args.model, "prompt": PROMPT, "max_tokens": args.max_tokens, "seed": seed + i,
               "stream": True} for i in range(args.n)]
    sent = time.time()
    streams = await asyncio.gather(*(one_plain_stream(http, body) for body in bodies))
    elapsed = max(done for _, done, _ in streams) - sent
    outputs = [client.of(f"{request_id}-") for request_id, _, _ in streams]
    tokens = sum(seen[-1].tokens for seen in outputs)
    return Side("plain", elapsed, tokens, tokens / elapsed, [text for _, _, text in streams],
                engine_times(outputs, sent))


def engine_times(outputs: list[list[Output]], start: float) -> dict[str, float]:
    """When the engine's first and last outputs came, from `start`, and how far apart the
    requests' first outputs were (requests that start apart share fewer of the engine's steps)."""
    firsts, lasts = [seen[0].at for seen in outputs], [seen[-1].at for seen in outputs]
    return {"first_token_s": min(firsts) - start, "first_token_spread_s": max(firsts) - min(firsts),
            "last_token_s": max(lasts) - start}


@dataclass
class Event:
    at: float
    node_id: str
    status: str
    text: str


async def follow(http: Any, loom_id: str) -> list[Event]:
    """Every Node event of the Loom's stream until [DONE]."""
    events = []
    async with http.stream("GET", f"/v1/looms/{loom_id}/stream") as response:
        if response.status_code != 200:
            raise RuntimeError(f"Loom stream: HTTP {response.status_code}: {(await response.aread())[:500]!r}")
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            data = line[len("data: "):]
            if data == "[DONE]":
                return events
            node = json.loads(data)
            if node.get("object") != "loom.node":
                raise RuntimeError(f"Loom stream failed: {node}")
            events.append(Event(time.time(), node["id"], node["status"], node["text"]))
    raise RuntimeError("Loom stream ended without [DONE]")


async def work_rows(services: Any, node_ids: list[str]) -> list[Any]:
    from sqlmodel import select

    from ledger.work.tables import LoomNode, Work

    async with services.sessions() as session:
        rows = (await session.exec(select(LoomNode, Work).join(Work, Work.id == LoomNode.work_id)
                                   .where(LoomNode.id.in_([uuid.UUID(i) for i in node_ids])))).all()
    return list(rows)


async def branch_side(http: Any, client: TimedClient, services: Any, args: argparse.Namespace,
                      seed: int, latencies: list[float] | None) -> Side:
    r = await http.post("/v1/looms", json={"prompt": PROMPT})
    r.raise_for_status()
    loom = r.json()
    root = loom["nodes"][0]["id"]
    sent = time.time()
    r = await http.post(f"/v1/looms/{loom['id']}/nodes/{root}/branch",
                        json={"model": args.model, "n": args.n, "max_tokens": args.max_tokens, "seed": seed})
    answered = time.time()
    if r.status_code != 200:
        raise RuntimeError(f"Branch: HTTP {r.status_code}: {r.text[:500]}")
    node_ids = [node["id"] for node in r.json()["data"]]
    events = await follow(http, loom["id"])
    done = time.time()
    rows = {str(node.id): (node, work) for node, work in await work_rows(services, node_ids)}
    ends = []
    for node_id in node_ids:
        node, work = rows[node_id]
        if node.status.value != "completed" or work.finished_at is None:
            raise RuntimeError(f"Node {node_id} ended {node.status.value}: {node.error}")
        ends.append(work.finished_at.timestamp())
    elapsed = max(ends) - answered
    outputs = {node_id: client.of(uuid.UUID(node_id).hex) for node_id in node_ids}
    tokens = sum(seen[-1].tokens for seen in outputs.values())
    if latencies is not None:
        for node_id, seen in outputs.items():
            latencies.extend(token_to_event(seen, [e for e in events if e.node_id == node_id]))
    starts = [rows[i][1].started_at.timestamp() for i in node_ids]
    extra = {"answer_s": answered - sent, "claim_s": min(starts) - answered,
             "claim_spread_s": max(starts) - min(starts), **engine_times(list(outputs.values()), answered),
             "done_after_last_end_s": done - max(ends)}
    return Side("branch", elapsed, tokens, tokens / elapsed, [rows[i][0].text for i in node_ids], extra)


def token_to_event(outputs: list[Output], events: list[Event]) -> list[float]:
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


# -- the stack in this process -------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stack:
    """The app behind uvicorn, a Runner with the Node kind, the real engine, a fresh ledger."""

    def __init__(self, args: argparse.Namespace, tmp: Path) -> None:
        self.args, self.tmp = args, tmp
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
        model = self.model = catalog.resolve(self.args.model)
        print(f"[bench] loading {model.id} ({model.weights_path()})", flush=True)
        self.engine = VllmEngine(model.weights_path(), model.vllm_args(), cpu=True)
        self.client = TimedClient(LocalEngineClient(self.engine))
        self.db = make_engine(self.database_url)
        # The routes ring the Runner beside them when a Branch queues its Nodes.
        self.services, self.runner = services_with_runner(settings, catalog, {model.id: self.client}, self.db)
        self.services.tokenizers.get(model)
        app = create_app()
        app.state.services = self.services
        self.runner.start()
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    lifespan="off", access_log=False))
        self.serving = asyncio.create_task(self.server.serve())
        while not self.server.started:
            if self.serving.done():
                self.serving.result()
            await asyncio.sleep(0.05)
        self.key = await self._key()

    async def _key(self) -> str:
        from ledger.accounts.keys import create_api_key, create_user

        async with self.services.ledger.write_sessions() as session:  # SQLite: the write lock at BEGIN
            user = await create_user(session, f"bench-{uuid.uuid4().hex[:8]}")
            _, raw = await create_api_key(session, user.id, "bench")
            await session.commit()
        return raw

    def http(self) -> Any:
        import httpx

        limits = httpx.Limits(max_connections=self.args.n + 8, max_keepalive_connections=self.args.n + 8)
        return httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.port}", timeout=600, trust_env=False,
                                 headers={"Authorization": f"Bearer {self.key}"}, limits=limits)

    async def stop(self) -> None:
        self.server.should_exit = True
        await asyncio.gather(self.serving, return_exceptions=True)
        await self.runner.stop()
        await self.services.feed.aclose()
        self.engine.shutdown()
        await self.db.dispose()


# -- rounds -------------------------------------------------------------------------------------
@dataclass
class Round:
    index: int
    order: str
    plain: Side
    branch: Side
    cpu: dict[str, float]

    @property
    def ratio(self) -> float:
        return self.branch.tok_per_s / self.plain.tok_per_s

    @property
    def same_texts(self) -> int:
        return sum(a == b for a, b in zip(self.plain.texts, self.branch.texts))


async def run_rounds(stack: Stack, args: argparse.Namespace) -> tuple[list[Round], list[float]]:
    rounds, latencies = [], []
    async with stack.http() as http:
        for index in range(-args.warmup, args.rounds):
            timed = index >= 0
            seed = args.seed + 1000 * (index + args.warmup)
            branch_first = index % 2 == 1
            probe = OtherLoad().start()
            sides: dict[str, Side] = {}
            for name in (("branch", "plain") if branch_first else ("plain", "branch")):
                if name == "plain":
                    sides[name] = await plain_side(http, stack.client, args, seed)
                else:
                    sides[name] = await branch_side(http, stack.client, stack.services, args, seed,
                                                    latencies if timed else None)
            cpu = probe.stop()
            label = f"round {index + 1}" if timed else f"warm-up {index + args.warmup + 1}"
            done = Round(index, "branch first" if branch_first else "plain first", sides["plain"], sides["branch"], cpu)
            print(f"[bench] {label}: plain {done.plain.tok_per_s:.1f} tok/s, Branch {done.branch.tok_per_s:.1f} tok/s, "
                  f"ratio {done.ratio:.3f}, same texts {done.same_texts}/{args.n}, other CPU {cpu['other_share']:.0%}",
                  flush=True)
            if timed:
                rounds.append(done)
    return rounds, latencies


# -- report -------------------------------------------------------------------------------------------
def summary(args: argparse.Namespace, stack: Stack, rounds: list[Round], latencies: list[float]) -> dict[str, Any]:
    from sqlalchemy import make_url

    def total(side: str) -> tuple[int, float]:
        return (sum(getattr(r, side).tokens for r in rounds), sum(getattr(r, side).elapsed_s for r in rounds))

    (plain_tokens, plain_s), (branch_tokens, branch_s) = total("plain"), total("branch")
    ms = [1000 * x for x in latencies]
    cpu_other = max(r.cpu["other_share"] for r in rounds)
    return {
        "model": stack.model.id, "profile": args.profile, "n": args.n, "max_tokens": args.max_tokens,
        "rounds": args.rounds, "warmup": args.warmup, "seed": args.seed, "prompt": PROMPT,
        "database": make_url(stack.database_url).get_backend_name(),
        "catch_up_s": stack.services.settings.stream_catch_up_s, "feed": type(stack.services.feed).__name__,
        "cpus": os.cpu_count(),
        "plain_tok_per_s": plain_tokens / plain_s, "branch_tok_per_s": branch_tokens / branch_s,
        "ratio": (branch_tokens / branch_s) / (plain_tokens / plain_s),
        "ratio_median_of_rounds": statistics.median(r.ratio for r in rounds),
        "ratio_min_max_of_rounds": [min(r.ratio for r in rounds), max(r.ratio for r in rounds)],
        "tokens": {"plain": plain_tokens, "branch": branch_tokens},
        "same_texts": sum(r.same_texts for r in rounds), "texts": args.n * len(rounds),
        "token_to_event_ms": {"p50": percentile(ms, 0.5), "p95": percentile(ms, 0.95), "max": max(ms),
                              "mean": statistics.fmean(ms), "tokens": len(ms)},
        "branch_extra_median_s": {key: statistics.median(r.branch.extra[key] for r in rounds)
                                  for key in rounds[0].branch.extra},
        "plain_extra_median_s": {key: statistics.median(r.plain.extra[key] for r in rounds)
                                 for key in rounds[0].plain.extra},
        "goal_ratio": GOAL_RATIO, "goal_met": (branch_tokens / branch_s) / (plain_tokens / plain_s) >= GOAL_RATIO,
        "other_cpu_share_max": cpu_other,
        "per_round": [{"order": r.order, "ratio": r.ratio, "same_texts": r.same_texts, "cpu": r.cpu,
                       "plain": {k: v for k, v in asdict(r.plain).items() if k != "texts"},
                       "branch": {k: v for k, v in asdict(r.branch).items() if k != "texts"}} for r in rounds],
    }


def ms(seconds: float) -> str:
    return f"{1000 * seconds:.0f} ms"


def print_report(out: dict[str, Any]) -> None:
    lat, extra, plain = out["token_to_event_ms"], out["branch_extra_median_s"], out["plain_extra_median_s"]
    print(f"\nloom: {out['model']} ({out['profile']} profile), n={out['n']} max_tokens={out['max_tokens']}, "
          f"{out['rounds']} rounds after {out['warmup']} warm-up, ledger {out['database']}, stream pushed by "
          f"{out['feed']} (catch-up every {out['catch_up_s']} s), {out['cpus']} CPUs")
    print(f"plain streams: {out['plain_tok_per_s']:.1f} tok/s ({out['tokens']['plain']} tokens; medians from the "
          f"send: first token {ms(plain['first_token_s'])}, the streams' first tokens within "
          f"{ms(plain['first_token_spread_s'])}, last token {ms(plain['last_token_s'])})")
    print(f"Branch:        {out['branch_tok_per_s']:.1f} tok/s ({out['tokens']['branch']} tokens; medians: the answer "
          f"{ms(extra['answer_s'])}, then from it: first claim {ms(extra['claim_s'])}, the Nodes' claims within "
          f"{ms(extra['claim_spread_s'])}, first token {ms(extra['first_token_s'])}, the Nodes' first tokens within "
          f"{ms(extra['first_token_spread_s'])}, last token {ms(extra['last_token_s'])}; [DONE] "
          f"{ms(extra['done_after_last_end_s'])} after the last Node's end)")
    lo, hi = out["ratio_min_max_of_rounds"]
    print(f"ratio (Branch / plain tok/s): {out['ratio']:.3f} (median of rounds {out['ratio_median_of_rounds']:.3f}, "
          f"{lo:.3f}-{hi:.3f}); same texts for the same seed: {out['same_texts']}/{out['texts']}")
    print(f"token to stream event: p50 {lat['p50']:.0f} ms, p95 {lat['p95']:.0f} ms, max {lat['max']:.0f} ms "
          f"over {lat['tokens']} tokens")
    print(f"goal: ratio >= {out['goal_ratio']}: {out['ratio']:.3f} ({'met' if out['goal_met'] else 'not met'})")
    print(f"other processes' CPU, the worst round: {out['other_cpu_share_max']:.0%}")
    if out["other_cpu_share_max"] > OTHER_CPU_WARN:
        print(f"WARNING: other processes used over {OTHER_CPU_WARN:.0%} of the machine in a round: "
              "the figures are not a clean measurement")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=8, help="Nodes of the Branch, and plain streams (1 to 8)")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--profile", default="embedded", help="the catalog: embedded (SmolLM2-135M) or test (tiny)")
    p.add_argument("--model", default="smollm2-135m", help="the model, as a request names it")
    p.add_argument("--database-url", help="the ledger (default: a fresh SQLite file, the embedded default's)")
    p.add_argument("--redis-url", help="Redis for the feed (and the traffic limits), as a cluster has; "
                                       "default: none, the embedded default's feed in the process")
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args()
    if not 1 <= args.n <= 8 or not 1 <= args.max_tokens <= 1000 or args.rounds < 1 or args.warmup < 0:
        p.error("--n 1 to 8, --max-tokens 1 to 1000, --rounds >= 1, --warmup >= 0")
    return args


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="acs-bench-loom-") as tmp:
        os.environ["TMPDIR"] = os.environ["VLLM_RPC_BASE_PATH"] = tmp  # vLLM's sockets go here, not /tmp
        stack = Stack(args, Path(tmp))
        await stack.start()
        try:
            rounds, latencies = await run_rounds(stack, args)
        finally:
            await stack.stop()
        return summary(args, stack, rounds, latencies)


def main() -> int:
    args = parse_args()
    prepare_environment(cpu=True)
    prepare_ray_environment()
    out = asyncio.run(run(args))
    print_report(out)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
