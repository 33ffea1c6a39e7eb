"""What vllm-lens costs a request: capture of every Layer, and one Steering vector.

    python bench/lens_overhead.py [--rounds 10] [--warmup 2] [--max-tokens 64 16 256]
        [--pristine-rounds 3] [--json out.json]

One engine (`deployments.vllm_engine.VllmEngine`, AsyncLLM with vllm-lens) on
the embedded default model (SmolLM2-135M, float32, CPU), in this process and
its EngineCore child. The same prompt (about 8 tokens), temperature 0, one
output at the end (`final_only`), one request at a time, as three kinds:

- plain:   no capture, no steering;
- capture: `capture_layers` = every Layer (the activations come back encoded,
           as the API answers them: zstd + base64);
- steered: one vector (random normal, float32, [1, hidden]) at the middle
           Layer, scale 1.

Each round runs every kind at every `--max-tokens`, the kinds' order rotated
from round to round, so drift of the machine hits all kinds alike. The first
`--warmup` rounds are not counted. It prints the median wall time of each kind
(send to the last output, encoding included), the ratios capture/plain and
steered/plain (of the medians, and the median of the per-round ratios), where
a capture's extra time goes on this side of the engine (vllm-lens's RPCs, its
unpickling, our encoding), and the size of the encoded capture.

vllm-lens installs its forward hooks on the first request that captures or
steers, and from then on they run for every request, plain ones too. Before
that, the bench times `--pristine-rounds` rounds of plain requests alone: the
hooks' cost to requests that use none of it.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.proc import proc_stat_fields  # noqa: E402
from deployments.vllm_runtime import prepare_environment  # noqa: E402

MODEL_ID = "smollm2-135m"  # the embedded profile's default
PROMPT = "The history of the ancient city of Rome"
KINDS = ("plain", "capture", "steered")
OTHER_CPU_WARN = 0.10
GOAL_TOKENS, GOAL_RATIO = 64, 1.3


# -- CPU of everything else -------------------------------------------------------------
def children_of() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        fields = proc_stat_fields(entry.name) if entry.name.isdigit() else None
        if fields is not None:
            tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def own_tree() -> list[int]:
    """This process and its descendants (the EngineCore, vLLM's helpers)."""
    tree, pids, todo = children_of(), [], [os.getpid()]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(tree.get(pid, []))
    return pids


class OtherLoad:
    """CPU used meanwhile by the bench with its engine, and by every other process.

    As in completions_overhead.py: the engine's OpenMP threads are pinned to
    both cores, and any other process that takes one stalls its steps.
    """

    @staticmethod
    def _ours() -> int:
        total = 0
        for pid in own_tree():
            fields = proc_stat_fields(pid)
            if fields is not None:
                # utime + stime, and the same for reaped children
                total += sum(int(v) for v in fields[11:15])
        return total

    @staticmethod
    def _cpu() -> tuple[int, int]:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        return values[0] + values[1] + values[2], values[7]  # user + nice + system; steal

    def start(self) -> "OtherLoad":
        self.t0, (self.busy0, self.steal0), self.ours0 = time.monotonic(), self._cpu(), self._ours()
        return self

    def stop(self) -> dict[str, float]:
        """Cores used by ours, by others and taken by the hypervisor since start; others' share."""
        tick = os.sysconf("SC_CLK_TCK")
        seconds = time.monotonic() - self.t0
        busy, steal = self._cpu()
        ours = (self._ours() - self.ours0) / tick
        other = max(0.0, (busy - self.busy0) / tick - ours)
        return {"seconds": seconds, "ours_cores": ours / seconds, "other_cores": other / seconds,
                "other_share": other / (seconds * (os.cpu_count() or 1)),
                "steal_cores": (steal - self.steal0) / tick / seconds}


# -- timing of vllm-lens's steps on this side of the engine -----------------------------------
@dataclass
class Parts:
    """Seconds one request spent in vllm-lens's RPCs, its merge (unpickle), our encoding."""

    rpc: dict[str, float] = field(default_factory=dict)
    merge: float = 0.0
    encode: float = 0.0


class Probe:
    """Wraps AsyncLLM.collective_rpc, vllm-lens's merge and our encoding with timers.

    Requests run one at a time, so `current` is the running request's Parts.
    """

    def __init__(self, llm: Any) -> None:
        import deployments.vllm_engine as vllm_engine
        from vllm_lens import _activations_plugin as plugin

        self.current = Parts()
        rpc = llm.collective_rpc

        async def timed_rpc(method: Any, *args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return await rpc(method, *args, **kwargs)
            finally:
                name = method if isinstance(method, str) else getattr(method, "__name__", "rpc")
                self.current.rpc[name] = self.current.rpc.get(name, 0.0) + time.perf_counter() - t0

        llm.collective_rpc = timed_rpc  # an instance attribute: vllm-lens calls self.collective_rpc
        self._wrap(plugin, "_merge_captured_states", "merge")
        self._wrap(vllm_engine, "encoded_activations", "encode")

    def _wrap(self, module: Any, name: str, part: str) -> None:
        inner = getattr(module, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                setattr(self.current, part, getattr(self.current, part) + time.perf_counter() - t0)

        setattr(module, name, timed)


# -- the requests ---------------------------------------------------------------------------
@dataclass
class Sample:
    kind: str
    max_tokens: int
    round: int
    seconds: float
    tokens: int
    parts: Parts
    activations: dict | None = None


class Bench:
    def __init__(self, engine: Any, prompt_ids: list[int], n_layers: int, hidden: int, steer_layer: int,
                 seed: int) -> None:
        import numpy as np

        from deployments.engine import Steer

        self.engine, self.prompt_ids, self.n_layers = engine, prompt_ids, n_layers
        rows = np.random.default_rng(seed).standard_normal((1, hidden)).astype(np.float32)
        self.steer = Steer(rows=rows, layer_indices=[steer_layer], scale=1.0)
        self.probe = Probe(engine.llm)
        self.count = 0

    def spec(self, kind: str, max_tokens: int) -> Any:
        from deployments.engine import SamplingSpec

        return SamplingSpec(
            max_tokens=max_tokens, temperature=0.0, final_only=True,
            capture_layers=list(range(self.n_layers)) if kind == "capture" else None,
            steering=[self.steer] if kind == "steered" else None,
        )

    async def one(self, kind: str, max_tokens: int, round_: int) -> Sample:
        from deployments.engine import GenerateRequest

        self.count += 1
        request = GenerateRequest(f"lens-bench-{self.count}-{kind}-{max_tokens}", list(self.prompt_ids),
                                  self.spec(kind, max_tokens))
        self.probe.current = parts = Parts()
        outputs = []
        t0 = time.perf_counter()
        async for out in self.engine.generate(request):
            outputs.append(out)
        seconds = time.perf_counter() - t0
        last = outputs[-1]
        if not last.finished:
            raise RuntimeError(f"{request.request_id}: the stream ended without finishing")
        if kind == "capture" and not last.activations:
            raise RuntimeError(f"{request.request_id}: a capture without activations")
        tokens = sum(len(c.token_ids) for out in outputs for c in out.choices)
        return Sample(kind, max_tokens, round_, seconds, tokens, parts, last.activations)


# -- figures --------------------------------------------------------------------------------
def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarize(samples: list[Sample], pristine: list[Sample], sizes: list[int]) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for size in sizes:
        by_kind = {k: [s for s in samples if s.max_tokens == size and s.kind == k] for k in KINDS}
        plain_ms = median([s.seconds for s in by_kind["plain"]]) * 1000
        plain_by_round = {s.round: s.seconds for s in by_kind["plain"]}
        row: dict[str, Any] = {}
        for kind, group in by_kind.items():
            ms = [s.seconds * 1000 for s in group]
            tokens = sorted({s.tokens for s in group})
            rpc = [sum(s.parts.rpc.values()) * 1000 for s in group]
            capture_rpc = [s.parts.rpc.get("get_captured_states", 0.0) * 1000 for s in group]
            row[kind] = {
                "median_ms": median(ms), "min_ms": min(ms), "max_ms": max(ms), "samples_ms": ms,
                "completion_tokens": tokens,
                "ms_per_token": median(ms) / max(tokens[0], 1) if len(tokens) == 1 else None,
                "ratio": median(ms) / plain_ms,
                "paired_ratio": median([s.seconds / plain_by_round[s.round] for s in group]),
                "lens_rpc_ms": median(rpc), "get_captured_states_ms": median(capture_rpc),
                "merge_ms": median([s.parts.merge * 1000 for s in group]),
                "encode_ms": median([s.parts.encode * 1000 for s in group]),
                "rpc_by_method_ms": {m: median([s.parts.rpc.get(m, 0.0) * 1000 for s in group])
                                     for m in sorted({m for s in group for m in s.parts.rpc})},
            }
        captured = next((s.activations["residual_stream"] for s in by_kind["capture"] if s.activations), None)
        if captured is not None:
            raw = 4 * math.prod(captured["shape"])
            row["capture_size"] = {"shape": captured["shape"], "dtype": captured["dtype"],
                                   "data_chars": len(captured["data"]), "raw_bytes": raw}
        before = [s.seconds * 1000 for s in pristine if s.max_tokens == size]
        if before:
            row["plain_before_hooks"] = {
                "median_ms": median(before), "min_ms": min(before), "samples_ms": before,
                "hooks_cost": plain_ms / median(before) - 1,
                "hooks_cost_min": row["plain"]["min_ms"] / min(before) - 1,
            }
        rows[str(size)] = row
    return rows


def report(args: argparse.Namespace, meta: dict[str, Any], rows: dict[str, Any], load: dict[str, float],
           pristine_load: dict[str, float] | None) -> list[str]:
    lines = [
        f"lens_overhead: {MODEL_ID} ({meta['n_layers']} layers, hidden {meta['hidden_size']}, float32, CPU), "
        f"prompt {meta['prompt_tokens']} tokens, {args.rounds} rounds after {args.warmup} warm-up, "
        f"capture = all {meta['n_layers']} layers, steer = 1 vector at layer {meta['steer_layer']}",
        f"{'max_tok':>7} {'kind':8} {'tokens':>6} {'median ms':>10} {'min ms':>8} {'ms/tok':>7} "
        f"{'ratio':>6} {'paired':>6} {'lens rpc':>9} {'unpickle':>9} {'encode':>7}",
    ]
    for size in args.max_tokens:
        row = rows[str(size)]
        for kind in KINDS:
            r = row[kind]
            per_tok = f"{r['ms_per_token']:.1f}" if r["ms_per_token"] is not None else "-"
            lines.append(
                f"{size:>7} {kind:8} {'/'.join(map(str, r['completion_tokens'])):>6} {r['median_ms']:>10.0f} "
                f"{r['min_ms']:>8.0f} {per_tok:>7} {r['ratio']:>6.3f} {r['paired_ratio']:>6.3f} "
                f"{r['lens_rpc_ms']:>9.1f} {r['merge_ms']:>9.1f} {r['encode_ms']:>7.1f}")
    for size in args.max_tokens:
        c = rows[str(size)].get("capture_size")
        if c:
            lines.append(
                f"capture at {size}: residual_stream shape {c['shape']} {c['dtype']}, data {c['data_chars']:,} "
                f"base64 chars ({c['raw_bytes']:,} raw bytes; x{c['data_chars'] / c['raw_bytes']:.2f})")
    before = [(size, rows[str(size)]["plain_before_hooks"]) for size in args.max_tokens
              if "plain_before_hooks" in rows[str(size)]]
    if before:
        lines.append(
            f"plain before any hooks were installed ({args.pristine_rounds} rounds, not interleaved): " + ", ".join(
                f"{size}: median {b['median_ms']:.0f} ms, min {b['min_ms']:.0f} ms (plain with hooks: median "
                f"{b['hooks_cost']:+.1%}, min {b['hooks_cost_min']:+.1%})" for size, b in before))
    goal = rows.get(str(GOAL_TOKENS), {}).get("capture")
    if goal:
        verdict = "met" if goal["ratio"] <= GOAL_RATIO else "NOT met"
        lines.append(f"goal: capture/plain at {GOAL_TOKENS} tokens <= {GOAL_RATIO}: {goal['ratio']:.3f} ({verdict})")
    for name, l in (("timed rounds", load), ("plain before hooks", pristine_load)):
        if l is None:
            continue
        warn = (f"  WARNING: other processes used {l['other_share']:.0%} of the machine; the figures are not clean"
                if l["other_share"] > OTHER_CPU_WARN else "")
        busy = sum(share > OTHER_CPU_WARN for share in l.get("per_round_other_share", []))
        rounds = f"; {busy} of {len(l['per_round_other_share'])} rounds above {OTHER_CPU_WARN:.0%}" if busy else ""
        steal = f", steal {l['steal_cores']:.2f} cores" if l["steal_cores"] >= 0.05 else ""
        lines.append(f"cpu during {name} ({l['seconds']:.0f} s): bench + engine {l['ours_cores']:.2f} cores, "
                     f"other processes {l['other_cores']:.2f} cores ({l['other_share']:.0%}{rounds}){steal}{warn}")
    token_mismatch = [size for size in args.max_tokens
                      if len({t for k in KINDS for t in rows[str(size)][k]["completion_tokens"]}) > 1]
    if token_mismatch:
        lines.append(f"WARNING: kinds generated different token counts at max_tokens {token_mismatch} "
                     "(EOS reached): compare ms/tok there")
    return lines


# -- run ----------------------------------------------------------------------------------------
async def run(args: argparse.Namespace, engine: Any, meta: dict[str, Any]) -> dict[str, Any]:
    prompt_ids = await engine.tokenize(args.prompt)
    meta["prompt_tokens"] = len(prompt_ids)
    bench = Bench(engine, prompt_ids, meta["n_layers"], meta["hidden_size"], meta["steer_layer"], args.seed)

    pristine: list[Sample] = []
    pristine_load = None
    if args.pristine_rounds:
        # No capture or steering has run yet: vllm-lens's hooks are not installed.
        for size in args.max_tokens:
            await bench.one("plain", size, -1)
        probe = OtherLoad().start()
        for r in range(args.pristine_rounds):
            for size in args.max_tokens:
                pristine.append(await bench.one("plain", size, r))
        pristine_load = probe.stop()
        print(f"[bench] plain before hooks: {len(pristine)} requests", flush=True)

    samples: list[Sample] = []
    probe = None
    per_round: list[float] = []
    for r in range(args.warmup + args.rounds):
        if r == args.warmup:
            probe = OtherLoad().start()
        round_probe = OtherLoad().start()
        for size in args.max_tokens:
            for i in range(len(KINDS)):
                kind = KINDS[(i + r) % len(KINDS)]
                sample = await bench.one(kind, size, r)
                if r >= args.warmup:
                    samples.append(sample)
        round_load = round_probe.stop()
        if r >= args.warmup:
            per_round.append(round(round_load["other_share"], 3))
        label = f"warm-up {r + 1}" if r < args.warmup else f"round {r + 1 - args.warmup}"
        print(f"[bench] {label} done in {round_load['seconds']:.1f} s "
              f"(other processes {round_load['other_share']:.0%})", flush=True)
    load = probe.stop() if probe else {"seconds": 0.0, "ours_cores": 0.0, "other_cores": 0.0, "other_share": 0.0,
                                       "steal_cores": 0.0}
    load["per_round_other_share"] = per_round
    rows = summarize(samples, pristine, args.max_tokens)
    return {"rows": rows, "load": load, "pristine_load": pristine_load}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10, help="timed rounds (default 10)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed rounds first (default 2)")
    parser.add_argument("--max-tokens", type=int, nargs="+", default=[64, 16, 256],
                        help="max_tokens of the rows (default 64 16 256)")
    parser.add_argument("--pristine-rounds", type=int, default=3,
                        help="rounds of plain requests before any hooks are installed (default 3; 0: none)")
    parser.add_argument("--prompt", default=PROMPT)
    parser.add_argument("--seed", type=int, default=0, help="of the Steering vector")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")

    prepare_environment(cpu=True)
    from deployments.catalog import load_catalog
    from deployments.vllm_engine import VllmEngine, lens_loaded

    model = load_catalog("embedded").models[MODEL_ID]
    meta = {"model": MODEL_ID, "n_layers": model.n_layers, "hidden_size": model.hidden_size,
            "steer_layer": model.n_layers // 2, "engine_args": model.vllm_args()}
    t0 = time.monotonic()
    engine = VllmEngine(model.weights_path(), model.vllm_args(), cpu=True)
    try:
        if not lens_loaded():
            raise RuntimeError("vllm-lens did not load")
        meta["startup_s"] = round(time.monotonic() - t0, 1)
        print(f"[bench] engine ready after {meta['startup_s']:.0f} s", flush=True)
        result = asyncio.run(run(args, engine, meta))
    finally:
        engine.shutdown()

    lines = report(args, meta, result["rows"], result["load"], result["pristine_load"])
    print("\n".join(lines), flush=True)
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k != "json"}
        Path(args.json).write_text(json.dumps({"settings": settings, "meta": meta, **result, "report": lines},
                                              indent=2, default=str))
        print(f"[bench] wrote {args.json}", flush=True)
    return 0


if __name__ == "__main__":  # vLLM spawns processes that import this module
    sys.exit(main())
