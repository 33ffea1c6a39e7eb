"""A Loom Branch of n Nodes against n plain streamed Completions of the same path text.

    python bench/loom.py [--n 8] [--max-tokens 64] [--rounds 4] [--warmup 1]
        [--model smollm2-135m] [--database-url URL] [--redis-url URL] [--json out.json]

One process holds the whole platform but Ray (bench/harness.py): the FastAPI app served by
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
import statistics
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import (PROMPT, Seen, Stack, TimedClient, add_stack_args, completion_bodies,  # noqa: E402
                           engine_times, latency_ms, main_of, ms, plain_stream, sse_data, stack_facts,
                           token_to_event, warn_other_cpu)
from bench.lens_overhead import OtherLoad  # noqa: E402

GOAL_RATIO = 0.9


# -- one side of a round ----------------------------------------------------------------------------
@dataclass
class Side:
    name: str
    elapsed_s: float
    tokens: int
    tok_per_s: float
    texts: list[str] = field(repr=False)
    extra: dict[str, float] = field(default_factory=dict)


async def plain_side(http: Any, client: TimedClient, args: argparse.Namespace, seed: int) -> Side:
    sent = time.time()
    streams = await asyncio.gather(*(plain_stream(http, body) for body in completion_bodies(args, args.n, seed)))
    elapsed = max(stream.done_at for stream in streams) - sent
    outputs = [client.of(f"{stream.request_id}-") for stream in streams]
    tokens = sum(seen[-1].tokens for seen in outputs)
    return Side("plain", elapsed, tokens, tokens / elapsed, [stream.text for stream in streams],
                engine_times(outputs, sent))


@dataclass
class Event(Seen):
    node_id: str
    status: str


async def follow(http: Any, loom_id: str) -> list[Event]:
    """Every Node event of the Loom's stream until [DONE]."""
    events = []
    async with http.stream("GET", f"/v1/looms/{loom_id}/stream") as response:
        async for at, node in sse_data(response, "Loom stream"):
            if node.get("object") != "loom.node":
                raise RuntimeError(f"Loom stream failed: {node}")
            events.append(Event(at, node["text"], node["id"], node["status"]))
    return events


async def work_rows(services: Any, node_ids: list[str]) -> list[Any]:
    from sqlmodel import col, select

    from ledger.work.tables import LoomNode, Work

    async with services.sessions() as session:
        rows = (await session.exec(select(LoomNode, Work).join(Work, col(Work.id) == LoomNode.work_id)
                                   .where(col(LoomNode.id).in_([uuid.UUID(i) for i in node_ids])))).all()
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
    async with stack.http(args.n) as http:
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
    def total(side: str) -> tuple[int, float]:
        return (sum(getattr(r, side).tokens for r in rounds), sum(getattr(r, side).elapsed_s for r in rounds))

    (plain_tokens, plain_s), (branch_tokens, branch_s) = total("plain"), total("branch")
    cpu_other = max(r.cpu["other_share"] for r in rounds)
    return {
        **stack_facts(stack), "profile": args.profile, "n": args.n, "max_tokens": args.max_tokens,
        "rounds": args.rounds, "warmup": args.warmup, "seed": args.seed, "prompt": PROMPT,
        "plain_tok_per_s": plain_tokens / plain_s, "branch_tok_per_s": branch_tokens / branch_s,
        "ratio": (branch_tokens / branch_s) / (plain_tokens / plain_s),
        "ratio_median_of_rounds": statistics.median(r.ratio for r in rounds),
        "ratio_min_max_of_rounds": [min(r.ratio for r in rounds), max(r.ratio for r in rounds)],
        "tokens": {"plain": plain_tokens, "branch": branch_tokens},
        "same_texts": sum(r.same_texts for r in rounds), "texts": args.n * len(rounds),
        "token_to_event_ms": latency_ms(latencies),
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
    warn_other_cpu(out["other_cpu_share_max"])


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=8, help="Nodes of the Branch, and plain streams (1 to 8)")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    add_stack_args(p)
    args = p.parse_args()
    if not 1 <= args.n <= 8 or not 1 <= args.max_tokens <= 1000 or args.rounds < 1 or args.warmup < 0:
        p.error("--n 1 to 8, --max-tokens 1 to 1000, --rounds >= 1, --warmup >= 0")
    return args


def main() -> int:
    args = parse_args()

    async def measure(stack: Stack) -> dict[str, Any]:
        return summary(args, stack, *await run_rounds(stack, args))

    return main_of(args, "loom", measure, print_report)


if __name__ == "__main__":
    sys.exit(main())
