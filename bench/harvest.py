"""Tokens per second of a harvest with each engine, against a plain HF loop on the same model.

    python bench/harvest.py [--engines torch vllm] [--prompts 2048] [--layers 7 15 22] [--shard-size 32]
        [--hf-batch 16] [--hf-order "in order" "by length"] [--min-words 3] [--max-words 60] [--seed 0]
        [--json out.json]
    python bench/harvest.py --token-budgets 256 512 1024 2048 4096 [--call-prompts 64 256]
        [--rows shared own] [--rounds 2]

All sides read the same prompts (mixed lengths, made from a seeded word list)
at the same Layers (the quartiles of the model's by default) of the embedded
default model (SmolLM2-135M, float32, CPU):

- baseline: HF transformers in this process, a plain batched forward loop
  (`--hf-batch` prompts at a time, padded on the right, with an attention
  mask) through the decoder (`model.model`: the blocks and the final norm, no
  LM head, as a prompt-only pass needs), with forward hooks on the Layers'
  blocks that copy each prompt's own rows out to NumPy. It writes no files.
  One untimed batch warms it up. It runs with the prompts in order, and
  sorted by length (almost no padding: the goal's baseline).
- harvests: `harvest.run.start_run` on a local Ray (2 CPUs), as the Runner
  starts one: the detached run actor, the Ray Data pipeline, the model host,
  shards, stats and manifest into a temporary folder; once per engine of
  `--engines`, one after the other, the catalog's `harvest_engine` set to it:
  `torch` (TorchForward, harvest/torch_forward.py, in the ModelHost actor)
  and `vllm` (VllmEngine with vllm-lens, its EngineCore a process of its
  own). Each host starts cold, so each run measures its load; it is released
  after its run, and the next run waits for its processes to end.

Printed: the baselines' tokens per second; for each engine, its forward
phase (tokens / `forward_s`, from the first forward call's start to the last
one's end) and its end to end without the fixed costs (from the first
forward call to the manifest written), each with its ratio to each baseline;
the fixed costs apart (model load, pipeline start); the write rate
(bytes_written / save_s, and over save_s + upload_s); peak memory (VmHWM) of
the baseline's process and of each process of the harvest, by its Ray role;
the torch engine against the vLLM one; the goal (issue 39: the torch
engine's forward phase >= 1.0 of the loop by length); and the CPU that other
processes used during each phase.

`--token-budgets` measures instead the torch engine's `token_budget` (the
padded tokens of one batch) in this process: after the baselines,
`TorchForward.forward_now` over the same prompts in order, in calls of each
of `--call-prompts` prompts (the engine sorts and packs within a call; the
harvest pipeline's call, its batch, is the default), at each budget, with
prompts sharing rows (the CPU's default) and/or a row each (`--rows`), each
setting in turn for `--rounds` rounds (the order reversed every other
round). It prints each setting's best tokens per second, its batches and
padded tokens, and its ratios to the best setting and to each baseline.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.lens_overhead import OtherLoad  # noqa: E402
from cluster.ray_env import prepare_ray_environment, start_local_ray  # noqa: E402
from deployments.vllm_runtime import prepare_environment  # noqa: E402

MODEL_ID = "smollm2-135m"  # the embedded profile's default
ENGINES = ("torch", "vllm")  # the catalog's harvest_engine values
GOAL_ENGINE, GOAL_BASELINE, GOAL_RATIO = "torch", "by length", 1.0  # issue 39: torch's forward >= 1.0 of it
HARVEST_ROLES = ("HarvestRun", "MapWorker", "ModelHost")
WORDS = (
    "the of and to in is was for that with as on by at from his her which this be are an or had not but were "
    "they have one all their has been who would more will there when can if its so out up about into than them "
    "river city light history music garden science winter market engine ocean forest letter window mountain "
    "station village island language problem morning evening summer family theory energy animal kitchen "
    "bridge harbor museum library painting journey machine planet crystal silver golden ancient modern quiet "
    "bright heavy gentle rapid slowly carefully between through against during without within beneath"
).split()


# -- the prompts ------------------------------------------------------------------------------
def make_prompts(n: int, min_words: int, max_words: int, seed: int) -> list[str]:
    """Texts of mixed lengths: word counts log-uniform between the bounds."""
    import numpy as np

    rng = np.random.default_rng(seed)
    lengths = np.exp(rng.uniform(np.log(min_words), np.log(max_words + 1), size=n)).astype(int)
    return [" ".join(rng.choice(WORDS, size=int(k))).capitalize() + "." for k in lengths]


# -- peak memory of the processes -------------------------------------------------------------
def vm_hwm_bytes(pid: int | str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def role_of(pid: str) -> str | None:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return None
    return role_of_command(cmdline)


def role_of_command(cmdline: str) -> str | None:
    """A harvest's process by its title; the torch engine runs inside the ModelHost's."""
    if "EngineCore" in cmdline or "VLLM" in cmdline:
        return "vLLM EngineCore"
    for role in HARVEST_ROLES:  # Ray names a process ray::<Class> or ray::<actor name>:<Class>.<method>
        if cmdline.startswith("ray::") and role in cmdline:
            return role
    return None


def wait_for_exit(roles: tuple[str, ...], timeout_s: float = 120.0) -> list[str]:
    """Wait until no process of these roles is left (the released host, the run's actors), so that the
    next harvest starts alone: a process that ends while OtherLoad measures takes its CPU time out of
    the sum of ours. Returns the roles still running at the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = sorted({role for entry in Path("/proc").iterdir()
                       if entry.name.isdigit() and (role := role_of(entry.name)) in roles})
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


class PeakMemory:
    """The highest VmHWM seen of each Ray role's processes (pool actors die with their pipeline)."""

    def __init__(self, every_s: float = 0.25) -> None:
        self.every_s, self.peaks, self._stop = every_s, {}, threading.Event()

    def _sample(self) -> None:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and (role := role_of(entry.name)) is not None:
                peak = vm_hwm_bytes(entry.name)
                if peak is not None:
                    self.peaks[role] = max(self.peaks.get(role, 0), peak)

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self._sample()

    def start(self) -> PeakMemory:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, int]:
        self._sample()
        self._stop.set()
        self._thread.join()
        return dict(sorted(self.peaks.items()))


# -- the baseline: HF transformers, a plain batched loop with hooks ------------------------------
def hf_baseline(weights: str, prompt_ids: list[list[int]], layers: list[int], batch: int,
                by_length: bool = False) -> dict[str, Any]:
    """The plain loop's figures; `by_length` batches the prompts sorted by length (less padding)."""
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(os.cpu_count() or 2)
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(weights, dtype=torch.float32).eval()
    load_s = time.perf_counter() - t0
    outputs: dict[int, torch.Tensor] = {}
    hooks = [model.model.layers[layer].register_forward_hook(
        lambda _m, _i, out, layer=layer: outputs.__setitem__(layer, out[0] if isinstance(out, tuple) else out))
        for layer in layers]
    pad = model.config.pad_token_id or 0

    def run(ids_batch: list[list[int]]) -> tuple[int, int]:
        longest = max(map(len, ids_batch))
        ids = torch.full((len(ids_batch), longest), pad, dtype=torch.long)
        mask = torch.zeros((len(ids_batch), longest), dtype=torch.long)
        for row, ids_one in enumerate(ids_batch):
            ids[row, : len(ids_one)] = torch.tensor(ids_one)
            mask[row, : len(ids_one)] = 1
        with torch.inference_mode():
            model.model(input_ids=ids, attention_mask=mask)
        for row, ids_one in enumerate(ids_batch):  # each prompt's own rows, out to NumPy
            np.stack([outputs[layer][row, : len(ids_one)].numpy() for layer in layers])
        return sum(map(len, ids_batch)), longest * len(ids_batch)

    if by_length:
        prompt_ids = sorted(prompt_ids, key=len)
    run(prompt_ids[:batch])  # warm-up, untimed
    real = padded = 0
    load = OtherLoad().start()
    t0 = time.perf_counter()
    for start in range(0, len(prompt_ids), batch):
        r, p = run(prompt_ids[start: start + batch])
        real, padded = real + r, padded + p
    seconds = time.perf_counter() - t0
    cpu = load.stop()
    for hook in hooks:
        hook.remove()
    outputs.clear()
    return {"load_s": load_s, "seconds": seconds, "tokens": real, "padded_tokens": padded,
            "tok_s": real / seconds, "peak_rss": vm_hwm_bytes(os.getpid()), "cpu": cpu}


# -- the harvest -----------------------------------------------------------------------------------
def harvest(model: Any, engine: str, prompts: list[str], layers: list[int], shard_size: int,
            storage: str) -> dict[str, Any]:
    """One harvest with the catalog's `harvest_engine` set to `engine`, from a cold host, which it releases."""
    import ray

    from harvest.model_host import release_host
    from harvest.run import RunSpec, RunStatus, start_run

    model = model.model_copy(update={"harvest_engine": engine})
    spec = RunSpec(job_id=str(uuid.uuid4()), model=model.model_dump(by_alias=True), prompts=prompts, layers=layers,
                   shard_size=shard_size, batch_size=None, add_special_tokens=True, directions=None,
                   storage_root=storage, time_limit_s=3600, keep_status_s=1)
    memory = PeakMemory().start()
    load = OtherLoad().start()  # Ray's processes and the actors are this process's descendants
    t0 = time.time()
    handle = start_run(spec)
    progress = []
    while True:
        status: RunStatus = ray.get(handle.status.remote())
        if status.state in ("done", "failed"):
            break
        progress.append((time.time() - t0, status.prompts_done))
        time.sleep(0.2)
    peaks, cpu = memory.stop(), load.stop()
    release_host(model.id)
    if left := wait_for_exit((*HARVEST_ROLES, "vLLM EngineCore")):
        print(f"[bench] WARNING: still running after the {engine} harvest: {', '.join(left)}", flush=True)
    if status.state != "done":
        raise RuntimeError(f"the {engine} harvest failed: {status.error}")
    runtime = json.loads((Path(storage) / spec.job_id / "manifest.json").read_text())["runtime"]["engine"]
    if runtime.get("harvest_engine") != engine:  # the engine that read the rows, as its manifest says
        raise RuntimeError(f"asked for the {engine} engine, the manifest says {runtime}")
    return {"submitted_at": t0, "status": status, "peaks": peaks, "progress": progress, "cpu": cpu,
            "engine_runtime": runtime}


# -- figures ---------------------------------------------------------------------------------------
def figures(baselines: dict[str, dict[str, Any]], run: dict[str, Any]) -> dict[str, Any]:
    """One engine's harvest: its rates, with their ratios to each baseline, its costs and memory."""
    status = run["status"]
    result, timings = status.result, status.result["timings"]
    tokens = result["tokens"]
    fixed_s = status.gpu_started_at - run["submitted_at"]  # model load + pipeline start
    streaming_s = status.ended_at - status.gpu_started_at  # first forward call -> manifest written
    forward_tok_s = tokens / timings["forward_s"]
    e2e_tok_s = tokens / streaming_s
    ratios = {name: {"forward": forward_tok_s / b["tok_s"], "e2e": e2e_tok_s / b["tok_s"]}
              for name, b in baselines.items()}
    return {
        "tokens": tokens, "n_shards": result["n_shards"], "bytes_written": result["bytes_written"],
        "timings": timings, "wall_s": status.ended_at - run["submitted_at"], "fixed_s": fixed_s,
        "pipeline_start_s": fixed_s - timings["load_s"], "streaming_s": streaming_s,
        "forward_tok_s": forward_tok_s, "e2e_tok_s": e2e_tok_s, "ratios": ratios,
        "write_bandwidth": result["bytes_written"] / timings["save_s"] if timings["save_s"] else None,
        "write_upload_bandwidth": result["bytes_written"] / (timings["save_s"] + timings["upload_s"]),
        "peaks": run["peaks"], "cpu": run["cpu"], "engine_runtime": run["engine_runtime"],
    }


def comparisons(baselines: dict[str, dict[str, Any]], harvests: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The goal's ratio (None when its engine or its baseline did not run) and torch against vLLM."""
    out: dict[str, Any] = {"goal_ratio": None, "torch_vs_vllm": None}
    if GOAL_ENGINE in harvests and GOAL_BASELINE in baselines:
        out["goal_ratio"] = harvests[GOAL_ENGINE]["ratios"][GOAL_BASELINE]["forward"]
    if "torch" in harvests and "vllm" in harvests:
        torch_, vllm = harvests["torch"], harvests["vllm"]
        out["torch_vs_vllm"] = {"forward": torch_["forward_tok_s"] / vllm["forward_tok_s"],
                                "e2e": torch_["e2e_tok_s"] / vllm["e2e_tok_s"],
                                "wall": vllm["wall_s"] / torch_["wall_s"]}  # tokens / wall_s
    return out


def mib(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**20:,.0f} MiB"


def header(args: argparse.Namespace, meta: dict[str, Any]) -> str:
    return (f"harvest: {MODEL_ID} ({meta['n_layers']} layers, hidden {meta['hidden_size']}, float32, CPU, "
            f"{os.cpu_count()} CPUs), {args.prompts} prompts of {meta['min_tokens']}-{meta['max_tokens']} tokens "
            f"(mean {meta['mean_tokens']:.1f}, {meta['tokens']:,} in all), layers {meta['layers']}, "
            f"shard_size {args.shard_size}")


def baseline_lines(args: argparse.Namespace, baselines: dict[str, dict[str, Any]]) -> list[str]:
    return [f"baseline HF loop, {name} (batch {args.hf_batch}, hooks, no files): {base['tok_s']:,.0f} tokens/s "
            f"({base['tokens']:,} tokens in {base['seconds']:.1f} s; {base['padded_tokens']:,} with padding; "
            f"model load {base['load_s']:.1f} s, not counted)" for name, base in baselines.items()]


def cpu_line(name: str, cpu: dict[str, float]) -> str:
    warn = "  WARNING: other processes used over 10% of the machine" if cpu["other_share"] > 0.10 else ""
    return (f"cpu during the {name} ({cpu['seconds']:.0f} s): ours {cpu['ours_cores']:.2f} cores, other "
            f"processes {cpu['other_cores']:.2f} cores ({cpu['other_share']:.0%}), steal "
            f"{cpu['steal_cores']:.2f}{warn}")


def engine_lines(engine: str, f: dict[str, Any]) -> list[str]:
    t = f["timings"]

    def vs(kind: str) -> str:
        return ", ".join(f"{r[kind]:.2f} of {name}" for name, r in f["ratios"].items())

    runtime = f["engine_runtime"]
    how = (f"token_budget {runtime.get('token_budget')}, shared rows {runtime.get('share_rows')}, "
           f"{runtime.get('threads')} threads" if engine == "torch" else f"max_num_seqs {runtime.get('max_num_seqs')}")
    return [
        f"harvest {engine} ({how}) forward phase: {f['forward_tok_s']:,.0f} tokens/s ({f['tokens']:,} tokens, "
        f"forward_s {t['forward_s']:.1f} s): {vs('forward')}",
        f"harvest {engine} end to end without fixed costs: {f['e2e_tok_s']:,.0f} tokens/s (first forward call to "
        f"manifest {f['streaming_s']:.1f} s): {vs('e2e')}",
        f"harvest {engine} fixed costs: model load (load_s) {t['load_s']:.1f} s, pipeline start "
        f"{f['pipeline_start_s']:.1f} s; wall from submit to manifest {f['wall_s']:.1f} s",
        f"harvest {engine} writes: {f['n_shards']} shards + stats + manifest, {f['bytes_written']:,} bytes; save_s "
        f"{t['save_s']:.2f} s -> {mib(f['write_bandwidth'])}/s; save_s + upload_s "
        f"{t['save_s'] + t['upload_s']:.2f} s -> {mib(f['write_upload_bandwidth'])}/s",
        f"harvest {engine} peak memory (VmHWM): "
        + ", ".join(f"{role} {mib(peak)}" for role, peak in f["peaks"].items()),
    ]


def summary_lines(c: dict[str, Any]) -> list[str]:
    """Torch against vLLM, and the goal."""
    lines = []
    if c["torch_vs_vllm"] is not None:
        r = c["torch_vs_vllm"]
        lines.append(f"torch / vllm, tokens/s: forward phase {r['forward']:.2f}, end to end without fixed costs "
                     f"{r['e2e']:.2f}, the whole harvest (submit to manifest, fixed costs in) {r['wall']:.2f}")
    if c["goal_ratio"] is None:
        lines.append(f"goal: not measured (it needs the {GOAL_ENGINE} engine and the HF loop {GOAL_BASELINE})")
    else:
        lines.append(f"goal: {GOAL_ENGINE} forward phase >= {GOAL_RATIO} of the HF loop {GOAL_BASELINE}: "
                     f"{c['goal_ratio']:.2f} ({'met' if c['goal_ratio'] >= GOAL_RATIO else 'not met'})")
    return lines


def report(args: argparse.Namespace, meta: dict[str, Any], baselines: dict[str, dict[str, Any]],
           harvests: dict[str, dict[str, Any]]) -> list[str]:
    lines = [header(args, meta), *baseline_lines(args, baselines)]
    for engine, f in harvests.items():
        lines += engine_lines(engine, f)
    if baselines:
        lines.append("peak memory (VmHWM) of the baselines' process: "
                     + mib(max(b["peak_rss"] or 0 for b in baselines.values())))
    lines += summary_lines(comparisons(baselines, harvests))
    phases = ([(f"baseline {name}", b["cpu"]) for name, b in baselines.items()]
              + [(f"{engine} harvest", f["cpu"]) for engine, f in harvests.items()])
    lines += [cpu_line(name, cpu) for name, cpu in phases]
    return lines


# -- the torch engine's token budget, in this process ------------------------------------------------
def sweep_budgets(model: Any, prompt_ids: list[list[int]], layers: list[int], budgets: list[int],
                  call_sizes: list[int], rows: list[str], rounds: int) -> list[dict[str, Any]]:
    """`TorchForward.forward_now` over the prompts, in calls of each call size (prompts in order), at each
    budget, with prompts sharing rows or a row each: every round's seconds (the settings in turn,
    reversed every other round, so that drift falls on all alike)."""
    from deployments.engine import ForwardRequest
    from harvest.torch_forward import TorchForward, pack

    engine = TorchForward.load(model.weights_path(), model_id=model.served_model_name,
                               max_model_len=model.engine.max_model_len)
    if "shared" in rows and not engine.share_rows:
        raise RuntimeError("the engine found that prompts of this model cannot share rows")
    tokens = sum(map(len, prompt_ids))
    settings = []
    for size in call_sizes:
        calls = [prompt_ids[start: start + size] for start in range(0, len(prompt_ids), size)]
        for budget in budgets:
            for mode in rows:
                batches = [batch for call in calls for batch in pack(list(map(len, call)), budget, mode == "shared")]
                settings.append({"call_prompts": size, "token_budget": budget, "rows": mode, "calls": calls,
                                 "seconds": [], "tokens": tokens, "batches": len(batches),
                                 "padded_tokens": sum(batch.padded_tokens for batch in batches)})
    engine.forward_now(ForwardRequest("warm-up", prompt_ids[:call_sizes[0]], layers))  # untimed
    load = OtherLoad().start()
    for round_ in range(rounds):
        for setting in settings if round_ % 2 == 0 else settings[::-1]:
            engine.token_budget, engine.share_rows = setting["token_budget"], setting["rows"] == "shared"
            t0 = time.perf_counter()
            for i, call in enumerate(setting["calls"]):
                engine.forward_now(ForwardRequest(f"sweep-{i}", call, layers))
            setting["seconds"].append(time.perf_counter() - t0)
            print(f"[bench] calls of {setting['call_prompts']}, budget {setting['token_budget']}, rows "
                  f"{setting['rows']}, round {round_ + 1}: {tokens / setting['seconds'][-1]:,.0f} tokens/s",
                  flush=True)
    cpu = load.stop()
    engine.shutdown()
    for setting in settings:
        del setting["calls"]
        setting["tok_s"] = tokens / min(setting["seconds"])
        setting["cpu"] = cpu
    return settings


def sweep_lines(args: argparse.Namespace, baselines: dict[str, dict[str, Any]],
                sweep: list[dict[str, Any]]) -> list[str]:
    lines = [f"torch engine in this process (forward_now over the prompts in order; best of {args.rounds} rounds):"]
    best = max(s["tok_s"] for s in sweep)
    for s in sweep:
        vs = "".join(f", {s['tok_s'] / b['tok_s']:.2f} of {name}" for name, b in baselines.items())
        rounds = ", ".join(f"{s['tokens'] / seconds:,.0f}" for seconds in s["seconds"])
        lines.append(f"  calls of {s['call_prompts']} prompts, token_budget {s['token_budget']}, rows {s['rows']}: "
                     f"{s['tok_s']:,.0f} "
                     f"tokens/s ({s['batches']} batches, {s['padded_tokens']:,} padded tokens; rounds {rounds}): "
                     f"{s['tok_s'] / best:.2f} of the best{vs}")
    phases = [(f"baseline {name}", b["cpu"]) for name, b in baselines.items()]
    phases.append(("sweep", sweep[0]["cpu"]))
    return lines + [cpu_line(name, cpu) for name, cpu in phases]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES),
                        help="the harvests' engines (the catalog's harvest_engine), in this order (default both)")
    parser.add_argument("--prompts", type=int, default=2048, help="how many (default 2048)")
    parser.add_argument("--layers", type=int, nargs="+", help="default: the quartiles of the model's Layers")
    parser.add_argument("--shard-size", type=int, default=32)
    parser.add_argument("--hf-batch", type=int, default=16, help="prompts per batch of the baseline (default 16)")
    parser.add_argument("--hf-order", nargs="*", choices=["in order", "by length"], default=["in order", "by length"],
                        help="the baselines' batching: prompts in order, and/or sorted by length (default both)")
    parser.add_argument("--min-words", type=int, default=3)
    parser.add_argument("--max-words", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--storage", help="a folder for the files (default: a temporary one, removed)")
    parser.add_argument("--token-budgets", type=int, nargs="+", metavar="N",
                        help="instead of the harvests: the torch engine in this process at each token_budget")
    parser.add_argument("--call-prompts", type=int, nargs="+", metavar="N",
                        help="with --token-budgets: prompts of one forward call (default: the pipeline's batch)")
    parser.add_argument("--rows", nargs="+", choices=["shared", "own"], default=["shared"],
                        help="with --token-budgets: prompts share rows (the CPU default), and/or a row each")
    parser.add_argument("--rounds", type=int, default=2, help="with --token-budgets: rounds of the settings")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args()

    prepare_environment(cpu=True)
    prepare_ray_environment()
    from transformers import AutoTokenizer

    from deployments.catalog import load_catalog
    from harvest.pipeline import PipelineSettings

    args.call_prompts = args.call_prompts or [PipelineSettings().batch_prompts]
    model = load_catalog("embedded").models[MODEL_ID]
    layers = sorted(set(args.layers or [model.n_layers // 4, model.n_layers // 2, model.n_layers * 3 // 4]))
    prompts = make_prompts(args.prompts, args.min_words, args.max_words, args.seed)
    tokenizer = AutoTokenizer.from_pretrained(model.tokenizer_path())
    prompt_ids = [ids[: model.max_model_len - 1] for ids in tokenizer(prompts)["input_ids"]]
    lengths = [len(ids) for ids in prompt_ids]
    meta = {"n_layers": model.n_layers, "hidden_size": model.hidden_size, "layers": layers,
            "tokens": sum(lengths), "min_tokens": min(lengths), "max_tokens": max(lengths),
            "mean_tokens": sum(lengths) / len(lengths), "engine_args": model.vllm_args()}
    print(f"[bench] {len(prompts)} prompts, {meta['tokens']:,} tokens; baselines first", flush=True)
    baselines = {}
    for name in args.hf_order:
        baselines[name] = hf_baseline(model.weights_path(), prompt_ids, layers, args.hf_batch, name == "by length")
        print(f"[bench] baseline {name}: {baselines[name]['tok_s']:,.0f} tokens/s", flush=True)
        gc.collect()  # the HF model goes before the harvest starts

    results: dict[str, Any] = {"settings": {k: v for k, v in vars(args).items() if k != "json"}, "meta": meta,
                               "baselines": baselines}
    if args.token_budgets:
        sweep = sweep_budgets(model, prompt_ids, layers, args.token_budgets, args.call_prompts, args.rows,
                              args.rounds)
        lines = [header(args, meta), *baseline_lines(args, baselines), *sweep_lines(args, baselines, sweep)]
        results["sweep"] = sweep
    else:
        runs = run_harvests(args, model, prompts, layers)
        harvests = {engine: figures(baselines, run) for engine, run in runs.items()}
        for engine, f in harvests.items():
            if f["tokens"] != meta["tokens"]:
                print(f"[bench] WARNING: the {engine} harvest read {f['tokens']} tokens, the baseline "
                      f"{meta['tokens']}")
        lines = report(args, meta, baselines, harvests)
        results |= {"harvests": harvests, "comparisons": comparisons(baselines, harvests),
                    "progress": {engine: run["progress"] for engine, run in runs.items()}}
    print("\n".join(lines), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({**results, "report": lines}, indent=2, default=str))
        print(f"[bench] wrote {args.json}", flush=True)
    return 0


def run_harvests(args: argparse.Namespace, model: Any, prompts: list[str], layers: list[int]) -> dict[str, Any]:
    """Each engine's harvest on one local Ray, one after the other."""
    storage = args.storage or tempfile.mkdtemp(prefix="acs-bench-harvest-")
    start_local_ray(num_cpus=os.cpu_count() or 2)
    harvests: dict[str, Any] = {}
    try:
        for engine in args.engines:
            print(f"[bench] harvest with the {engine} engine", flush=True)
            harvests[engine] = harvest(model, engine, prompts, layers, args.shard_size, storage)
    finally:
        import ray

        ray.shutdown()
        if not args.storage:
            shutil.rmtree(storage, ignore_errors=True)
    return harvests


if __name__ == "__main__":  # vLLM and Ray spawn processes that may import this module
    sys.exit(main())
