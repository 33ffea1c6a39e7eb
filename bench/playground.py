"""The Playground's Run stream against plain streamed Completions of the same requests: the time
from a token leaving the engine to its event at the client, at 1 and 8 Runs at once.

    python bench/playground.py [--runs 1,8] [--max-tokens 64] [--rounds 6] [--warmup 1]
        [--model smollm2-135m] [--database-url URL] [--redis-url URL] [--stages] [--json out.json]

The platform in one process as bench/harness.py starts it (uvicorn on 127.0.0.1, a fresh
SQLite ledger unless `--database-url`, a Runner with the `run` kind, the real engine on the
embedded default model), the Run stream pushed by the feed of the process, or by Redis pub/sub
with `--redis-url`. A User signs in to the App through POST /account/sign-in (its session and
CSRF cookies, as the App's browser holds them); another User's API key sends the plain streams.

For each count N, each round runs both sides one after the other (their order alternates from
round to round) with the same seeds: plain stream i and Run i send the same request, which
samples with seed + i.

- plain: N `POST /v1/completions` with `stream: true` at once; for each token, the time from
  the engine's output that carried it to the SSE event at the client that holds it.
- Runs: `POST /account/runs` with the N requests (a start takes at most 6: 8 Runs are two
  starts, sent at once), then one `GET /account/runs/stream?ids=...` of all of them, as the
  Playground page follows its Runs; for each token, the time from the engine's output to the
  first stream event whose text holds it. Everything between is inside: the Runner's publish,
  the feed, the stream route's batching of messages and its documents, the SSE send.

`--stages` also notes, on the Run side, when the Runner published each text (the feed's
`publish`) and when the stream route made each event (before the SSE send), and splits each
token's time into engine output -> publish -> event made -> event at the client.

The goal: at each N, the Run stream's p50 within +30 ms of the plain stream's.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import (PROMPT, Output, Seen, Stack, TimedClient, add_stack_args, completion_bodies,  # noqa: E402
                           engine_times, latency_ms, main_of, ms, plain_stream, sse_data, stack_facts,
                           token_to_event, warn_other_cpu)
from bench.lens_overhead import OtherLoad  # noqa: E402

GOAL_ADDED_P50_MS = 30.0
PASSWORD = "bench horse battery staple"


# -- the App's session -----------------------------------------------------------------------------
async def signed_in(stack: Stack, connections: int) -> Any:
    """A client of the app with a new User's App session: the cookies of POST /account/sign-in,
    and on each request the CSRF header from the cookie, as the App's JS sends it."""
    from ledger.accounts import passwords
    from ledger.accounts.tables import User

    email = f"bench-{uuid.uuid4().hex[:8]}@example.org"
    async with stack.services.ledger.write_sessions() as session:
        session.add(User(name=email, email=email, password_hash=passwords.hash_password(PASSWORD),
                         password_set_at=stack.services.clock()))
        await session.commit()
    http = stack.http(connections, headers={})

    async def csrf(request: Any) -> None:
        request.headers["X-CSRF-Token"] = http.cookies.get("acs_csrf") or ""

    http.event_hooks["request"] = [csrf]
    for method, path, body, status in (("GET", "/account/csrf", None, 204),
                                       ("POST", "/account/sign-in", {"email": email, "password": PASSWORD}, 200)):
        r = await http.request(method, path, json=body)
        if r.status_code != status:
            raise RuntimeError(f"{method} {path}: HTTP {r.status_code}: {r.text[:500]}")
    return http


# -- the stages of a Run's token (--stages) ---------------------------------------------------------
@dataclass
class Stages:
    """When the Runner published each Run's texts (the feed's publish), and when the app sent
    each Run event to uvicorn (the ASGI send of the stream's body)."""

    published: dict[str, list[Seen]] = field(default_factory=dict)  # by Run id
    sent: dict[str, list[Seen]] = field(default_factory=dict)

    def watch_app(self, app: Any) -> Any:
        """`app`, noting each Run event of a stream's body as it goes to uvicorn."""
        async def watched(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http" or scope["path"] != "/account/runs/stream":
                return await app(scope, receive, send)

            async def timed_send(message: dict[str, Any]) -> None:
                at = time.time()
                for line in message.get("body", b"").split(b"\n"):
                    if line.startswith(b"data: {"):
                        run = json.loads(line[len(b"data: "):])
                        if run.get("choices"):
                            self.sent.setdefault(run["id"], []).append(Seen(at, run["choices"][0]["text"]))
                await send(message)

            await app(scope, receive, timed_send)
        return watched

    def watch_feed(self, stack: Stack) -> None:
        feed, publish = stack.services.feed, stack.services.feed.publish

        async def timed_publish(topic: str, message: dict[str, Any]) -> None:
            if "texts" in message:
                self.published.setdefault(message["run_id"], []).append(Seen(time.time(), message["texts"][0]))
            await publish(topic, message)

        feed.publish = timed_publish  # type: ignore[method-assign]  # this instance's, in this bench only

    def split(self, run_id: str, outputs: list[Output], events: Sequence[Seen]) -> dict[str, list[float]]:
        """Each token's time, cut at its text's publish and at its event's send to uvicorn; none
        where either was not seen (a feed message of another shape than domain/playground/news.py's)."""
        if not self.published.get(run_id) or not self.sent.get(run_id):
            return {}
        publish = token_to_event(outputs, self.published.get(run_id, []))
        sent = token_to_event(outputs, self.sent.get(run_id, []))
        at_client = token_to_event(outputs, events)
        return {"engine_to_publish": publish, "publish_to_send": [m - p for m, p in zip(sent, publish)],
                "send_to_client": [c - m for c, m in zip(at_client, sent)]}


class LoopStalls:
    """The longest time the event loop (the app's, the Runner's and the clients', all one) was
    late to wake a task that sleeps 5 ms at a time: a stall there delays every stream at once.
    And the longest of Python's full garbage collections (generation 2), which stall it so."""

    def __init__(self) -> None:
        self.longest_s = self.longest_gc_s = 0.0
        self._gc_started = 0.0
        gc.callbacks.append(self._gc)
        self._task = asyncio.create_task(self._watch())

    def _gc(self, phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self.longest_gc_s = max(self.longest_gc_s, time.perf_counter() - self._gc_started)

    async def _watch(self) -> None:
        clock = asyncio.get_running_loop().time
        while True:
            before = clock()
            await asyncio.sleep(0.005)
            self.longest_s = max(self.longest_s, clock() - before - 0.005)

    async def stop(self) -> tuple[float, float]:
        """The longest stall, and the longest full collection."""
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        gc.callbacks.remove(self._gc)
        return self.longest_s, self.longest_gc_s


# -- one side of a round ----------------------------------------------------------------------------
@dataclass
class Side:
    name: str
    latencies: list[float]
    texts: list[str] = field(repr=False)
    extra: dict[str, float] = field(default_factory=dict)
    stages: dict[str, list[float]] = field(default_factory=dict)


async def plain_side(http: Any, client: TimedClient, args: argparse.Namespace, n: int, seed: int) -> Side:
    sent = time.time()
    streams = await asyncio.gather(*(plain_stream(http, body) for body in completion_bodies(args, n, seed)))
    latencies = []
    for stream in streams:
        latencies += token_to_event(client.of(f"{stream.request_id}-"), stream.events)
    outputs = [client.of(f"{stream.request_id}-") for stream in streams]
    return Side("plain", latencies, [stream.text for stream in streams], engine_times(outputs, sent))


@dataclass
class RunEvent(Seen):
    run_id: str
    status: str


async def follow(http: Any, run_ids: list[str]) -> tuple[float, list[RunEvent]]:
    """When the Run stream answered, and each of its Run events until [DONE]."""
    events = []
    async with http.stream("GET", "/account/runs/stream", params={"ids": ",".join(run_ids)}) as response:
        opened = time.time()
        async for at, run in sse_data(response, "Run stream"):
            if run.get("object") != "playground.run":
                raise RuntimeError(f"Run stream failed: {run}")
            text = run["choices"][0]["text"] if run.get("choices") else ""
            events.append(RunEvent(at, text, run["id"], run.get("status", "deleted")))
    return opened, events


async def start(http: Any, bodies: list[dict[str, Any]]) -> list[str]:
    r = await http.post("/account/runs", json={"requests": bodies})
    if r.status_code != 201 or r.json()["refused"]:
        raise RuntimeError(f"start: HTTP {r.status_code}: {r.text[:500]}")
    return [run["id"] for run in r.json()["runs"]]


async def run_side(http: Any, client: TimedClient, args: argparse.Namespace, n: int, seed: int,
                   stages: Stages | None) -> Side:
    from domain.playground.service import MOST_AT_ONCE

    bodies = completion_bodies(args, n, seed)
    sent = time.time()
    starts = await asyncio.gather(*(start(http, bodies[i:i + MOST_AT_ONCE]) for i in range(0, n, MOST_AT_ONCE)))
    answered = time.time()
    run_ids = [run_id for ids in starts for run_id in ids]
    opened, events = await follow(http, run_ids)
    latencies, texts, split = [], [], {}
    outputs = {run_id: client.of(uuid.UUID(run_id).hex) for run_id in run_ids}
    for run_id, seen in outputs.items():
        mine = [e for e in events if e.run_id == run_id]
        if mine[-1].status != "completed":
            raise RuntimeError(f"Run {run_id} ended {mine[-1].status}")
        latencies += token_to_event(seen, mine)
        texts.append(mine[-1].text)
        if stages is not None:
            for stage, times in stages.split(run_id, seen, mine).items():
                split.setdefault(stage, []).extend(times)
    early = sum(o.tokens - before.tokens for seen in outputs.values()
                for before, o in zip([Output(0, 0, "")] + seen, seen) if o.at < opened)
    extra = {"answer_s": answered - sent, "stream_open_s": opened - answered,
             **engine_times(list(outputs.values()), answered), "tokens_before_open": early}
    return Side("runs", latencies, texts, extra, split)


# -- rounds -------------------------------------------------------------------------------------
@dataclass
class Round:
    n: int
    index: int
    order: str
    plain: Side
    runs: Side
    cpu: dict[str, float]
    loop_stall_s: float
    gc_s: float

    @property
    def same_texts(self) -> int:
        return sum(a == b for a, b in zip(self.plain.texts, self.runs.texts))


async def one_round(api: Any, app: Any, stack: Stack, args: argparse.Namespace, n: int, index: int,
                    stages: Stages | None) -> Round:
    seed = args.seed + 1000 * (index + args.warmup) + 100_000 * n
    runs_first = index % 2 == 1
    probe, stalls = OtherLoad().start(), LoopStalls()
    sides: dict[str, Side] = {}
    for name in (("runs", "plain") if runs_first else ("plain", "runs")):
        if name == "plain":
            sides[name] = await plain_side(api, stack.client, args, n, seed)
        else:
            sides[name] = await run_side(app, stack.client, args, n, seed, stages)
    done = Round(n, index, "runs first" if runs_first else "plain first", sides["plain"], sides["runs"], probe.stop(),
                 *await stalls.stop())
    label = f"round {index + 1}" if index >= 0 else f"warm-up {index + args.warmup + 1}"
    plain, runs = latency_ms(done.plain.latencies), latency_ms(done.runs.latencies)
    print(f"[bench] N={n} {label} ({done.order}): plain p50 {plain['p50']:.1f} max {plain['max']:.1f} ms, Runs p50 "
          f"{runs['p50']:.1f} max {runs['max']:.1f} ms, the loop's longest stall {ms(done.loop_stall_s)} "
          f"(full GC {ms(done.gc_s)}), same texts "
          f"{done.same_texts}/{n}, other CPU {done.cpu['other_share']:.0%}", flush=True)
    return done


async def run_rounds(stack: Stack, args: argparse.Namespace, stages: Stages | None) -> list[Round]:
    if stages is not None:
        stages.watch_feed(stack)
    most = max(args.runs)
    app = await signed_in(stack, most)  # a client that made requests already: closed, not entered
    try:
        async with stack.http(most) as api:
            rounds = [await one_round(api, app, stack, args, n, index, stages)
                      for n in args.runs for index in range(-args.warmup, args.rounds)]
    finally:
        await app.aclose()
    return [r for r in rounds if r.index >= 0]


# -- report -------------------------------------------------------------------------------------------
def at_n(rounds: list[Round]) -> dict[str, Any]:
    def pooled(side: str) -> list[float]:
        return [x for r in rounds for x in getattr(r, side).latencies]

    plain, runs = latency_ms(pooled("plain")), latency_ms(pooled("runs"))
    added = runs["p50"] - plain["p50"]
    stages = {stage: latency_ms([x for r in rounds for x in r.runs.stages.get(stage, [])])
              for stage in dict.fromkeys(stage for r in rounds for stage in r.runs.stages)}
    return {
        "plain_ms": plain, "runs_ms": runs, "added_p50_ms": added, "goal_met": added <= GOAL_ADDED_P50_MS,
        "added_p50_ms_by_round": [1000 * (statistics.median(r.runs.latencies) - statistics.median(r.plain.latencies))
                                  for r in rounds],
        "same_texts": sum(r.same_texts for r in rounds), "texts": sum(r.n for r in rounds),
        "runs_extra_median": {key: statistics.median(r.runs.extra[key] for r in rounds) for key in rounds[0].runs.extra},
        "plain_extra_median": {key: statistics.median(r.plain.extra[key] for r in rounds)
                               for key in rounds[0].plain.extra},
        "runs_stages_ms": stages, "loop_stall_ms_by_round": [1000 * r.loop_stall_s for r in rounds],
        "full_gc_ms_by_round": [1000 * r.gc_s for r in rounds],
        "other_cpu_share_max": max(r.cpu["other_share"] for r in rounds),
    }


def summary(args: argparse.Namespace, stack: Stack, rounds: list[Round]) -> dict[str, Any]:
    by_n = {str(n): at_n([r for r in rounds if r.n == n]) for n in args.runs}
    return {
        **stack_facts(stack), "profile": args.profile, "runs": args.runs, "max_tokens": args.max_tokens,
        "rounds": args.rounds, "warmup": args.warmup, "seed": args.seed, "prompt": PROMPT,
        "goal_added_p50_ms": GOAL_ADDED_P50_MS, "by_n": by_n, "goal_met": all(at["goal_met"] for at in by_n.values()),
        "other_cpu_share_max": max(r.cpu["other_share"] for r in rounds),
    }


def figures(lat: dict[str, float]) -> str:
    return f"p50 {lat['p50']:6.1f}  p95 {lat['p95']:6.1f}  max {lat['max']:6.1f} ms ({lat['tokens']} tokens)"


def print_report(out: dict[str, Any]) -> None:
    print(f"\nplayground: {out['model']} ({out['profile']} profile), max_tokens={out['max_tokens']}, {out['rounds']} "
          f"rounds after {out['warmup']} warm-up at each N, ledger {out['database']}, Run stream pushed by "
          f"{out['feed']} (catch-up every {out['catch_up_s']} s), {out['cpus']} CPUs")
    print("token to stream event, from the engine's output to the event at the client:")
    for n, at in out["by_n"].items():
        extra, plain = at["runs_extra_median"], at["plain_extra_median"]
        print(f"N={n}  plain stream: {figures(at['plain_ms'])}")
        print(f"N={n}  Run stream:   {figures(at['runs_ms'])}")
        rounds = ", ".join(f"{x:+.1f}" for x in at["added_p50_ms_by_round"])
        print(f"N={n}  Run p50 - plain p50: {at['added_p50_ms']:+.1f} ms (by round: {rounds}): "
              f"{'PASS' if at['goal_met'] else 'FAIL'} (goal <= +{out['goal_added_p50_ms']:.0f} ms)")
        print(f"N={n}  medians: plain first token {ms(plain['first_token_s'])} from the send; Runs: the starts' "
              f"answer {ms(extra['answer_s'])}, then from it: the stream's answer {ms(extra['stream_open_s'])}, "
              f"first token {ms(extra['first_token_s'])} (the Runs' first tokens within "
              f"{ms(extra['first_token_spread_s'])}), {extra['tokens_before_open']:.0f} tokens before the stream "
              f"answered; same texts for the same seed {at['same_texts']}/{at['texts']}")
        stalls = ", ".join(f"{x:.0f}" for x in at["loop_stall_ms_by_round"])
        gcs = ", ".join(f"{x:.0f}" for x in at["full_gc_ms_by_round"])
        print(f"N={n}  the event loop's longest stall by round: {stalls} ms; the longest full GC: {gcs} ms")
        for stage, lat in at["runs_stages_ms"].items():
            print(f"N={n}    Run stage {stage:<18} {figures(lat)}")
    print(f"goal: the Run stream's p50 within +{out['goal_added_p50_ms']:.0f} ms of the plain stream's at every N: "
          f"{'PASS' if out['goal_met'] else 'FAIL'}")
    warn_other_cpu(out["other_cpu_share_max"])


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", default="1,8", help="how many Runs (and plain streams) at once: counts, 1 to 12")
    p.add_argument("--rounds", type=int, default=6, help="timed rounds at each count")
    p.add_argument("--warmup", type=int, default=1, help="untimed rounds first, at each count")
    p.add_argument("--stages", action="store_true", help="also split the Run side's time at the publish and "
                                                         "at the stream route's event")
    add_stack_args(p)
    args = p.parse_args()
    try:
        args.runs = [int(part) for part in args.runs.split(",")]
    except ValueError:
        p.error("--runs: counts separated by commas, such as 1,8")
    if (not all(1 <= n <= 12 for n in args.runs) or not 1 <= args.max_tokens <= 1000 or args.rounds < 1
            or args.warmup < 0):
        p.error("--runs 1 to 12 each, --max-tokens 1 to 1000, --rounds >= 1, --warmup >= 0")
    return args


def main() -> int:
    args = parse_args()
    stages = Stages() if args.stages else None

    async def measure(stack: Stack) -> dict[str, Any]:
        return summary(args, stack, await run_rounds(stack, args, stages))

    return main_of(args, "playground", measure, print_report, None if stages is None else stages.watch_app)


if __name__ == "__main__":
    sys.exit(main())
