"""Tokens per second of a harvest, against a plain HF loop on the same model.

    python bench/harvest.py [--prompts 2048] [--layers 7 15 22] [--shard-size 32]
        [--hf-batch 16] [--min-words 3] [--max-words 60] [--seed 0] [--json out.json]

Both sides read the same prompts (mixed lengths, made from a seeded word list)
at the same Layers (the quartiles of the model's by default) of the embedded
default model (SmolLM2-135M, float32, CPU):

- baseline: HF transformers in this process, a plain batched forward loop
  (`--hf-batch` prompts at a time in the order of `prompts`, padded on the
  right, with an attention mask) through the decoder (`model.model`: the
  blocks and the final norm, no LM head, as a prompt-only pass needs), with
  forward hooks on the Layers' blocks that copy each prompt's own rows out to
  NumPy. It writes no files. One untimed batch warms it up.
- harvest: `harvest.run.start_run` on a local Ray (2 CPUs), as the Runner
  starts one: the detached run actor, the Ray Data pipeline, the model host
  (VllmEngine with vllm-lens), shards, stats and manifest into a temporary
  folder. The host starts cold, so the run measures its load.

Printed: the baseline's tokens per second; the harvest's forward phase
(tokens / `forward_s`, from the first forward call's start to the last one's
end) and its end to end without the fixed costs (from the first forward call
to the manifest written), each with its ratio to the baseline; the fixed costs
apart (model load, pipeline start); the write bandwidth (bytes_written /
save_s, and over save_s + upload_s); and peak memory (VmHWM) of the baseline's
process and of each process of the harvest, by its Ray role.
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
GOAL_RATIO = 0.8  # the issue's: forward phase >= 0.8 of the plain loop
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
    if "EngineCore" in cmdline or "VLLM" in cmdline:
        return "vLLM EngineCore"
    for role in HARVEST_ROLES:  # Ray names a process ray::<Class> or ray::<actor name>:<Class>.<method>
        if cmdline.startswith("ray::") and role in cmdline:
            return role
    return None


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
def harvest(model: Any, prompts: list[str], layers: list[int], shard_size: int, storage: str) -> dict[str, Any]:
    import ray

    from harvest.model_host import release_host
    from harvest.run import RunSpec, start_run

    spec = RunSpec(job_id=str(uuid.uuid4()), model=model.model_dump(by_alias=True), prompts=prompts, layers=layers,
                   shard_size=shard_size, batch_size=None, add_special_tokens=True, directions=None,
                   storage_root=storage, time_limit_s=3600, keep_status_s=60)
    memory = PeakMemory().start()
    load = OtherLoad().start()  # Ray's processes and the actors are this process's descendants
    t0 = time.time()
    handle = start_run(spec)
    progress = []
    while (status := ray.get(handle.status.remote())).state not in ("done", "failed"):
        progress.append((time.time() - t0, status.prompts_done))
        time.sleep(0.2)
    peaks, cpu = memory.stop(), load.stop()
    release_host(model.id)
    if status.state != "done":
        raise RuntimeError(f"the harvest failed: {status.error}")
    return {"submitted_at": t0, "status": status, "peaks": peaks, "progress": progress, "cpu": cpu}


# -- figures ---------------------------------------------------------------------------------------
def figures(baselines: dict[str, dict[str, Any]], run: dict[str, Any]) -> dict[str, Any]:
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
        "forward_tok_s": forward_tok_s, "e2e_tok_s": e2e_tok_s,
        "ratios": ratios, "goal_ratio": min(r["forward"] for r in ratios.values()),
        "write_bandwidth": result["bytes_written"] / timings["save_s"] if timings["save_s"] else None,
        "write_upload_bandwidth": result["bytes_written"] / (timings["save_s"] + timings["upload_s"]),
        "peaks": run["peaks"], "cpu": run["cpu"],
    }


def mib(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**20:,.0f} MiB"


def report(args: argparse.Namespace, meta: dict[str, Any], baselines: dict[str, dict[str, Any]],
           f: dict[str, Any]) -> list[str]:
    t = f["timings"]
    lines = [
        f"harvest: {MODEL_ID} ({meta['n_layers']} layers, hidden {meta['hidden_size']}, float32, CPU, "
        f"{os.cpu_count()} CPUs), {args.prompts} prompts of {meta['min_tokens']}-{meta['max_tokens']} tokens "
        f"(mean {meta['mean_tokens']:.1f}, {meta['tokens']:,} in all), layers {meta['layers']}, "
        f"shard_size {args.shard_size}",
    ]
    for name, base in baselines.items():
        lines.append(
            f"baseline HF loop, {name} (batch {args.hf_batch}, hooks, no files): {base['tok_s']:,.0f} tokens/s "
            f"({base['tokens']:,} tokens in {base['seconds']:.1f} s; {base['padded_tokens']:,} with padding; "
            f"model load {base['load_s']:.1f} s, not counted)")
    def vs(kind: str) -> str:
        return ", ".join(f"{r[kind]:.2f} of {name}" for name, r in f["ratios"].items())

    lines += [
        f"harvest forward phase: {f['forward_tok_s']:,.0f} tokens/s ({f['tokens']:,} tokens, forward_s "
        f"{t['forward_s']:.1f} s): {vs('forward')}",
        f"harvest end to end without fixed costs: {f['e2e_tok_s']:,.0f} tokens/s (first forward call to manifest "
        f"{f['streaming_s']:.1f} s): {vs('e2e')}",
        f"fixed costs: model load (load_s) {t['load_s']:.1f} s, pipeline start {f['pipeline_start_s']:.1f} s; "
        f"wall from submit to manifest {f['wall_s']:.1f} s",
        f"writes: {f['n_shards']} shards + stats + manifest, {f['bytes_written']:,} bytes; save_s {t['save_s']:.2f} s "
        f"-> {mib(f['write_bandwidth'])}/s; save_s + upload_s {t['save_s'] + t['upload_s']:.2f} s "
        f"-> {mib(f['write_upload_bandwidth'])}/s",
        "peak memory (VmHWM): baseline process " + mib(max(b["peak_rss"] or 0 for b in baselines.values()))
        + "; harvest: " + ", ".join(f"{role} {mib(peak)}" for role, peak in f["peaks"].items()),
        f"goal: forward phase >= {GOAL_RATIO} of the plain loop (the faster baseline): {f['goal_ratio']:.2f} "
        f"({'met' if f['goal_ratio'] >= GOAL_RATIO else 'not met'})",
    ]
    phases = [(f"baseline {name}", b["cpu"]) for name, b in baselines.items()] + [("harvest", f["cpu"])]
    for name, cpu in phases:
        warn = "  WARNING: other processes used over 10% of the machine" if cpu["other_share"] > 0.10 else ""
        lines.append(f"cpu during the {name} ({cpu['seconds']:.0f} s): ours {cpu['ours_cores']:.2f} cores, other "
                     f"processes {cpu['other_cores']:.2f} cores ({cpu['other_share']:.0%}), steal "
                     f"{cpu['steal_cores']:.2f}{warn}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=2048, help="how many (default 2048)")
    parser.add_argument("--layers", type=int, nargs="+", help="default: the quartiles of the model's Layers")
    parser.add_argument("--shard-size", type=int, default=32)
    parser.add_argument("--hf-batch", type=int, default=16, help="prompts per batch of the baseline (default 16)")
    parser.add_argument("--hf-order", nargs="+", choices=["in order", "by length"], default=["in order", "by length"],
                        help="the baselines' batching: prompts in order, and/or sorted by length (default both)")
    parser.add_argument("--min-words", type=int, default=3)
    parser.add_argument("--max-words", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--storage", help="a folder for the files (default: a temporary one, removed)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args()

    prepare_environment(cpu=True)
    prepare_ray_environment()
    from transformers import AutoTokenizer

    from deployments.catalog import load_catalog

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

    storage = args.storage or tempfile.mkdtemp(prefix="acs-bench-harvest-")
    start_local_ray(num_cpus=os.cpu_count() or 2)
    try:
        run = harvest(model, prompts, layers, args.shard_size, storage)
    finally:
        import ray

        ray.shutdown()
        if not args.storage:
            shutil.rmtree(storage, ignore_errors=True)
    result = figures(baselines, run)
    if result["tokens"] != meta["tokens"]:
        print(f"[bench] WARNING: the harvest read {result['tokens']} tokens, the baseline {meta['tokens']}")
    lines = report(args, meta, baselines, result)
    print("\n".join(lines), flush=True)
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k != "json"}
        Path(args.json).write_text(json.dumps({"settings": settings, "meta": meta, "baselines": baselines,
                                               "harvest": result, "progress": run["progress"], "report": lines},
                                              indent=2, default=str))
        print(f"[bench] wrote {args.json}", flush=True)
    return 0


if __name__ == "__main__":  # vLLM and Ray spawn processes that may import this module
    sys.exit(main())
