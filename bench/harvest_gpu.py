"""A harvest's forward passes and shard writes on a GPU, at Llama 3.1 8B's shape (issue 39).

    python3 bench/harvest_gpu.py [--prompts 20000] [--min-tokens 32] [--max-tokens 1024]
        [--layers 8 16 31] [--token-budget 65536] [--window 2048] [--batches-per-call 2]
        [--shard-size 32] [--queue 2] [--check 4] [--seconds-limit 360] [--out DIR] [--keep-shards]
        [--config PATH] [--num-layers N] [--device cuda] [--dtype bfloat16] [--seed 0] [--json out.json]

It needs torch, transformers, safetensors and numpy, and of the project only harvest/torch_forward.py
(with the engine boundary it imports, stdlib alone) and bench/harvest_gpu_*.py: the lent GPU machine
has PyTorch but no vLLM, Ray or pydantic.

- **The model**: a Llama of the `--config`'s shape (Llama 3.1 8B's by default:
  models/llama-8b-random/config.json where cluster/build_models.py made it, else its tracked copy
  bench/llama-8b-config.json), built by transformers' `AutoModel` (the decoder, no LM head) with
  random weights (normal, std 0.02, seed `--seed`) made on the device in `--dtype`. No weights are
  read or carried.
- **The prompts**: `--prompts` random token ids (seeded), of lengths drawn uniformly from
  `--min-tokens` to `--max-tokens`.
- **The engine**: harvest/torch_forward.py's `TorchForward.forward_now`, reading the `--layers`
  (default three spread over the model, the last one its last block, so the pass runs every block
  and tokens/s is the 8B's). A call keeps its captures in pinned memory until it returns, so the
  bench cuts the prompts into windows of `--window`, sorts each window by length with the engine's
  own `pack` (batches of at most `--token-budget` padded tokens), and hands the engine
  `--batches-per-call` of those batches a call: packing as tight as a whole window's sort, host
  memory of a call's rows alone, and each batch's copy to the host overlapping the next batch's
  forward pass (the engine's design) but for a call's last.
- **The writes**: each call's rows go to a writer thread through a queue of `--queue` calls
  (bench/harvest_gpu_sink.py): `--shard-size` prompts a shard in harvest/shards.py's format, in the
  order the prompts finish, fsynced, then deleted unless `--keep-shards`. Deleting is the default
  because the files would not fit the lent machine's 64 GiB disk: 20,000 prompts of 528 tokens on
  average, 3 Layers of 4,096 bfloat16 values (24.6 KB a token), are about 260 GB.
- **The time limit**: no call but the first starts after `--seconds-limit` seconds of forward
  passes; the bench then reports what it finished, and says that it stopped early.

Printed (and written by `--json`):
- tokens/s: the prompts' own tokens over the forward phase (the first call's start to the last
  call's end, writes waited for included), and end to end (until the last shard was fsynced).
- MFU, the model FLOP utilisation: FLOPs of the work done over (forward seconds x `--peak-tflops`,
  989 TFLOP/s, the H100's and H200's dense bfloat16 peak by the datasheet). Work FLOPs = 2 x (the
  matmul weights of the blocks that ran, 0 to the last Layer read) x tokens + per Layer that ran
  and per prompt of n tokens, causal attention 4 x heads x head_dim x n(n+1)/2 (QK^T and AV over the
  pairs a token sees). Padding is not counted; the packing's share of real tokens is printed
  apart, with the TFLOP/s that counting the padded tokens gives. Also printed: the issue's formula,
  2 x all parameters (embedding and LM head included) x tokens + attention of every block, over the
  same seconds.
- the write rate: bytes over the writer's seconds in open, write and fsync (the disk's rate), the
  rate the forward phase needed, and how long forward calls waited on a full queue (the writes kept
  up when that is about 0).
- peak GPU memory (torch.cuda.max_memory_allocated and _reserved, before the check) and the
  process's peak RSS (pinned buffers included).
- the check (bench/harvest_gpu_check.py): the first `--check` prompts written, read back from their
  shards, against a float32 reference of the same weights; exit 1 when it fails.
"""
from __future__ import annotations

import argparse
import gc
import json
import resource
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from bench.harvest_gpu_check import check_prompts  # noqa: E402
from bench.harvest_gpu_sink import DonePrompt, ShardSink  # noqa: E402
from deployments.engine import ForwardRequest  # noqa: E402
from deployments.lens_checks import check_forward_request  # noqa: E402
from harvest.torch_forward import Batch, TorchForward, decoder_blocks, pack  # noqa: E402

BUILT_CONFIG = REPO_ROOT / "models" / "llama-8b-random" / "config.json"
TRACKED_CONFIG = REPO_ROOT / "bench" / "llama-8b-config.json"
PEAK_TFLOPS = 989.0  # H100/H200 SXM dense bfloat16, the datasheet's (issue 39)
DEFAULT_SHARD_SIZE = 32  # the API's default shard_size (domain/harvests/validation.py)
GIB = 1 << 30
PROGRESS_S = 60.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="A harvest's forward passes and shard writes on a GPU (issue 39).")
    parser.add_argument("--prompts", type=int, default=20000)
    parser.add_argument("--min-tokens", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--layers", type=int, nargs="+", help="default: a quarter, half and the last block")
    parser.add_argument("--token-budget", type=int, help="padded tokens a batch (default: the engine's)")
    parser.add_argument("--window", type=int, default=2048, help="prompts sorted by length together")
    parser.add_argument("--batches-per-call", type=int, default=2)
    parser.add_argument("--shard-size", type=int, default=DEFAULT_SHARD_SIZE)
    parser.add_argument("--queue", type=int, default=2, help="forward calls' rows waiting for the writer")
    parser.add_argument("--check", type=int, default=4, help="prompts checked against float32 (0: none)")
    parser.add_argument("--seconds-limit", type=float, default=360.0, help="no forward call starts after it")
    parser.add_argument("--out", type=Path, help="the shards' folder (default: a new temporary one)")
    parser.add_argument("--keep-shards", action="store_true")
    parser.add_argument("--config", type=Path, help="a config.json (default: Llama 3.1 8B's)")
    parser.add_argument("--num-layers", type=int, help="build only this many blocks (a smoke run's)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--peak-tflops", type=float, default=PEAK_TFLOPS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if not 1 <= args.min_tokens <= args.max_tokens:
        parser.error("--min-tokens must be at least 1 and at most --max-tokens")
    return args


# -- the model -------------------------------------------------------------------------------------
def load_config(path: Path | None, num_layers: int | None) -> Any:
    from transformers import AutoConfig

    path = path or (BUILT_CONFIG if BUILT_CONFIG.exists() else TRACKED_CONFIG)
    fields = json.loads(path.read_text())
    config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    if num_layers is not None:
        config.num_hidden_layers = num_layers
    return config


def build_model(config: Any, device: str, dtype: torch.dtype, seed: int) -> Any:
    """The decoder with random weights made where it runs (transformers' init: normal, std
    `initializer_range`)."""
    from transformers import AutoModel

    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModel.from_config(config, dtype=dtype, attn_implementation="sdpa")
    return model.eval()


def default_layers(n_blocks: int) -> list[int]:
    return sorted({n_blocks // 4, n_blocks // 2, n_blocks - 1})


# -- the prompts -----------------------------------------------------------------------------------
def prompt_lengths(args: argparse.Namespace) -> np.ndarray:
    return np.random.default_rng(args.seed).integers(args.min_tokens, args.max_tokens + 1, size=args.prompts)


def window_tokens(seed: int, window: int, lengths: np.ndarray, vocab_size: int) -> list[np.ndarray]:
    """The token ids (int32) of one window's prompts: the same for the same seed and window."""
    ids = np.random.default_rng([seed, window]).integers(0, vocab_size, size=int(lengths.sum()), dtype=np.int32)
    return np.split(ids, np.cumsum(lengths)[:-1])


def calls_of_window(lengths: np.ndarray, token_budget: int, per_call: int, share_rows: bool) -> Iterator[list[Batch]]:
    """The window's batches as the engine packs them (it packs each call again, alike), per_call a call."""
    batches = pack(lengths.tolist(), token_budget, share_rows)
    for start in range(0, len(batches), per_call):
        yield batches[start:start + per_call]


# -- FLOPs -----------------------------------------------------------------------------------------
@dataclass
class FlopModel:
    block_weights: list[int]  # matmul weights (2-D parameters) of each block
    all_parameters: int  # the causal LM's: the decoder's and its LM head's (unless tied)
    heads: int
    head_dim: int

    @classmethod
    def of(cls, model: Any) -> FlopModel:
        config = model.config
        head = 0 if config.tie_word_embeddings else config.vocab_size * config.hidden_size
        heads = config.num_attention_heads
        return cls(block_weights=[sum(p.numel() for p in block.parameters() if p.ndim == 2)
                                  for block in decoder_blocks(model)],
                   all_parameters=sum(p.numel() for p in model.parameters()) + head, heads=heads,
                   head_dim=getattr(config, "head_dim", None) or config.hidden_size // heads)

    def attention(self, lengths: np.ndarray) -> float:
        """One Layer's causal attention FLOPs over prompts of these lengths."""
        n = lengths.astype(np.float64)
        return float(4 * self.heads * self.head_dim * (n * (n + 1) / 2).sum())

    def work(self, lengths: np.ndarray, last_layer: int) -> float:
        blocks = last_layer + 1
        return 2.0 * sum(self.block_weights[:blocks]) * float(lengths.sum()) + blocks * self.attention(lengths)

    def issue_formula(self, lengths: np.ndarray) -> float:
        return 2.0 * self.all_parameters * float(lengths.sum()) + len(self.block_weights) * self.attention(lengths)


# -- the run ---------------------------------------------------------------------------------------
@dataclass
class RunTotals:
    calls: int = 0
    batches: int = 0
    padded_tokens: int = 0
    padded_flops: float = 0.0
    lengths: list[int] = field(default_factory=list)
    stopped_early: bool = False
    forward_s: float = 0.0
    end_to_end_s: float = 0.0


def run_prompts(engine: TorchForward, sink: ShardSink, args: argparse.Namespace, layers: list[int],
                flops: FlopModel) -> RunTotals:
    """Every window's calls through the engine, each call's rows to the sink, until the time limit."""
    totals = RunTotals()
    lengths = prompt_lengths(args)
    vocab = int(engine.model.config.vocab_size)
    started = progress = time.perf_counter()
    for window, first in enumerate(range(0, args.prompts, args.window)):
        window_lengths = lengths[first:first + args.window]
        tokens = window_tokens(args.seed, window, window_lengths, vocab)
        for batches in calls_of_window(window_lengths, engine.token_budget, args.batches_per_call,
                                       engine.share_rows):
            if totals.calls and time.perf_counter() - started > args.seconds_limit:
                totals.stopped_early = True
                break
            members = [m for batch in batches for m in batch.members]
            request = ForwardRequest(f"bench-{totals.calls}", [tokens[m].tolist() for m in members], layers)
            check_forward_request(request, engine.facts)
            rows = engine.forward_now(request)
            sink.put([DonePrompt(first + m, tokens[m], r.rows) for m, r in zip(members, rows)])
            totals.calls += 1
            totals.batches += len(batches)
            totals.lengths.extend(len(tokens[m]) for m in members)
            for batch in batches:
                totals.padded_tokens += batch.padded_tokens
                padded = np.full(len(batch.rows), batch.lengths[0])
                totals.padded_flops += flops.work(padded, layers[-1])
            progress = progress_line(totals, started, progress, sink)
        if totals.stopped_early:
            break
    totals.forward_s = time.perf_counter() - started
    sink.close()
    totals.end_to_end_s = time.perf_counter() - started
    return totals


def progress_line(totals: RunTotals, started: float, last: float, sink: ShardSink) -> float:
    """Every PROGRESS_S, a line of what is done, so a run cut short still tells how far it went."""
    now = time.perf_counter()
    if now - last < PROGRESS_S:
        return last
    tokens = sum(totals.lengths)
    print(f"[{now - started:.0f} s] {len(totals.lengths):,} prompts, {tokens:,} tokens, "
          f"{tokens / (now - started):,.0f} tokens/s; {sink.totals.shards} shards written, "
          f"{sink.totals.put_wait_s:.1f} s waited on the writer", flush=True)
    return now


def warm_up(engine: TorchForward, args: argparse.Namespace, layers: list[int]) -> float:
    """One untimed call of the run's largest batches: kernels chosen, memory pools grown."""
    started = time.perf_counter()
    per_batch = max(1, engine.token_budget // args.max_tokens)
    ids = np.arange(args.max_tokens) * 7919 % int(engine.model.config.vocab_size)  # the work depends on shapes alone
    engine.forward_now(ForwardRequest("warm-up", [ids.tolist()] * (per_batch * args.batches_per_call), layers))
    synchronize(engine)
    return time.perf_counter() - started


def synchronize(engine: TorchForward) -> None:
    if engine.on_gpu:
        torch.cuda.synchronize(engine.device)


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux gives KiB


def gpu_memory(engine: TorchForward) -> dict[str, int | None]:
    if not engine.on_gpu:
        return {"peak_allocated": None, "peak_reserved": None}
    return {"peak_allocated": torch.cuda.max_memory_allocated(engine.device),
            "peak_reserved": torch.cuda.max_memory_reserved(engine.device)}


def machine(args: argparse.Namespace) -> dict[str, str]:
    import transformers

    name = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "cpu"
    return {"device": name, "torch": torch.__version__, "transformers": transformers.__version__}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """The whole bench: build, warm up, run, check; the figures as a dict."""
    dtype = getattr(torch, args.dtype)
    config = load_config(args.config, args.num_layers)
    layers = args.layers or default_layers(config.num_hidden_layers)
    started = time.perf_counter()
    model = build_model(config, args.device, dtype, args.seed)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize(args.device)
    build_s = time.perf_counter() - started
    engine = TorchForward(model, model_id="bench-harvest-gpu", max_model_len=args.max_tokens + 1,
                          token_budget=args.token_budget)
    flops = FlopModel.of(model)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    warm_up_s = warm_up(engine, args, layers)
    folder = args.out or Path(tempfile.mkdtemp(prefix="harvest-gpu-"))
    folder.mkdir(parents=True, exist_ok=True)
    refuse_if_disk_too_small(args, folder, config.hidden_size, len(layers), dtype)
    sink = ShardSink(folder, shard_size=args.shard_size, queue_calls=args.queue, keep=args.keep_shards,
                     read_back=args.check)
    run = run_prompts(engine, sink, args, layers, flops)
    memory = {**gpu_memory(engine), "weights": weight_bytes, "host_peak_rss": peak_rss_bytes()}
    check = None
    if args.check:
        gc.collect()
        if engine.on_gpu:
            torch.cuda.empty_cache()
        check = {**check_prompts(model, layers, sink.read_back), "read_back_equal": sink.read_back_equal}
    setup = {"build_s": build_s, "warm_up_s": warm_up_s, "shards_folder": str(folder),
             "shards_filesystem": filesystem_of(folder)}
    if not args.keep_shards and args.out is None:
        shutil.rmtree(folder, ignore_errors=True)
    return figures(args, config, layers, flops, run, sink, memory, check, setup)


def filesystem_of(folder: Path) -> str:
    """The type and device of the file system that holds `folder` (a tmpfs would write to memory)."""
    path, best = str(folder.resolve()), ("?", "?", "")
    for line in Path("/proc/mounts").read_text().splitlines():
        device, mount, kind = line.split()[:3]
        inside = path == mount or path.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best[2]):
            best = (kind, device, mount)
    return f"{best[0]} ({best[1]} on {best[2] or '?'})"


def refuse_if_disk_too_small(args: argparse.Namespace, folder: Path, hidden: int, n_layers: int,
                             dtype: torch.dtype) -> None:
    if not args.keep_shards:
        return
    mean_tokens = (args.min_tokens + args.max_tokens) / 2
    needed = args.prompts * mean_tokens * (n_layers * hidden * torch.tensor([], dtype=dtype).element_size() + 4)
    free = shutil.disk_usage(folder).free
    if needed > free:
        raise SystemExit(f"--keep-shards needs about {needed / GIB:.1f} GiB in {folder}; {free / GIB:.1f} GiB are free")


def figures(args: argparse.Namespace, config: Any, layers: list[int], flops: FlopModel, run: RunTotals,
            sink: ShardSink, memory: dict[str, Any], check: dict[str, Any] | None,
            setup: dict[str, Any]) -> dict[str, Any]:
    lengths = np.asarray(run.lengths, dtype=np.int64)
    tokens = int(lengths.sum())
    peak = args.peak_tflops * 1e12
    work, issue = flops.work(lengths, layers[-1]), flops.issue_formula(lengths)
    writes = sink.totals
    return {
        "machine": machine(args),
        "model": {"blocks": config.num_hidden_layers, "hidden_size": config.hidden_size, "dtype": args.dtype,
                  "parameters": flops.all_parameters, "block_weights_run": sum(flops.block_weights[:layers[-1] + 1])},
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "layers": layers,
        "prompts_run": len(run.lengths), "prompts_asked": args.prompts, "tokens": tokens,
        "stopped_early": run.stopped_early,
        "calls": run.calls, "batches": run.batches, "padded_tokens": run.padded_tokens,
        "packing": tokens / run.padded_tokens if run.padded_tokens else None,
        "forward_s": run.forward_s, "end_to_end_s": run.end_to_end_s,
        "tokens_per_s": tokens / run.forward_s if run.forward_s else None,
        "tokens_per_s_end_to_end": tokens / run.end_to_end_s if run.end_to_end_s else None,
        "work_flops": work, "mfu": work / (run.forward_s * peak) if run.forward_s else None,
        "issue_formula_flops": issue, "mfu_issue_formula": issue / (run.forward_s * peak) if run.forward_s else None,
        "padded_tflops_per_s": run.padded_flops / run.forward_s / 1e12 if run.forward_s else None,
        "peak_tflops": args.peak_tflops,
        "writes": {**asdict(writes),
                   "disk_bytes_per_s": writes.bytes / writes.write_s if writes.write_s else None,
                   "needed_bytes_per_s": writes.bytes / run.forward_s if run.forward_s else None,
                   "drain_s": run.end_to_end_s - run.forward_s},
        "memory": memory,
        "check": check,
        "setup": setup,
    }


# -- the report ------------------------------------------------------------------------------------
def report(f: dict[str, Any]) -> str:
    m, w, mem, check = f["model"], f["writes"], f["memory"], f["check"]
    lines = [
        f"harvest_gpu: {f['machine']['device']}, torch {f['machine']['torch']}, "
        f"transformers {f['machine']['transformers']}",
        f"model: {m['blocks']} blocks, hidden {m['hidden_size']}, {m['dtype']}, {m['parameters']:,} parameters "
        f"(with the LM head), random, made in {f['setup']['build_s']:.1f} s; warm-up {f['setup']['warm_up_s']:.1f} s",
        f"prompts: {f['prompts_run']:,} of {f['prompts_asked']:,}, {f['tokens']:,} tokens; Layers {f['layers']}; "
        f"{f['calls']} calls, {f['batches']} batches"
        + (" -- STOPPED EARLY at --seconds-limit" if f["stopped_early"] else ""),
        f"tokens/s: {_n(f['tokens_per_s'], ',.0f')} forward ({f['forward_s']:.1f} s), "
        f"{_n(f['tokens_per_s_end_to_end'], ',.0f')} end to end ({f['end_to_end_s']:.1f} s, until the last shard's fsync)",
        f"MFU: {_n(f['mfu'], '.1%')} = 2 x {m['block_weights_run']:,} block weights x tokens + causal attention "
        f"of {f['layers'][-1] + 1} blocks ({f['work_flops']:.3e} FLOPs) / ({f['forward_s']:.1f} s x "
        f"{f['peak_tflops']:.0f} TFLOP/s)",
        f"MFU by the issue's formula (2 x {m['parameters']:,} parameters x tokens + attention of every block): "
        f"{_n(f['mfu_issue_formula'], '.1%')}",
        f"packing: real/padded tokens {_n(f['packing'], '.3f')}; with the padding counted "
        f"{_n(f['padded_tflops_per_s'], ',.0f')} TFLOP/s",
        f"writes: {w['bytes'] / 1e9:,.2f} GB in {w['shards']} shards of {f['args']['shard_size']} prompts to "
        f"{f['setup']['shards_folder']}, {f['setup']['shards_filesystem']}"
        + ("" if f["args"]["keep_shards"] else ", each deleted once fsynced") + "; disk "
        f"{_n(w['disk_bytes_per_s'] and w['disk_bytes_per_s'] / 1e6, ',.0f')} MB/s while writing "
        f"({w['write_s']:.1f} s busy); the forward phase needed {_n(w['needed_bytes_per_s'] and w['needed_bytes_per_s'] / 1e6, ',.0f')} MB/s; "
        f"forward calls waited {w['put_wait_s']:.2f} s on a full queue ("
        + ("the writes kept up" if w["put_wait_s"] < 0.01 * max(f["forward_s"], 1e-9) else "the writes did NOT keep up")
        + f"); the writer idled {w['idle_s']:.1f} s; drain {w['drain_s']:.2f} s",
        f"memory: GPU peak allocated {_gib(mem['peak_allocated'])}, reserved {_gib(mem['peak_reserved'])} "
        f"(weights {_gib(mem['weights'])}); host peak RSS {_gib(mem['host_peak_rss'])}",
    ]
    if check is not None:
        per_layer = "; ".join(
            f"Layer {layer}: {_n(norm, '.4f')} (<= {allowed[0]:.4f}), {_n(largest, '.4f')} (<= {allowed[1]:.4f})"
            for layer, norm, largest, allowed in zip(f["layers"], check["norm_relative"], check["max_relative"],
                                                     check["tolerances"]))
        lines.append(
            f"check: prompts {check['prompts']} ({list(check['tokens'].values())} tokens), read back from their shards "
            f"(the engine's bits: {check['read_back_equal']}), against float32 blocks 0-{f['layers'][-1]}, "
            f"norm-relative and max-relative errors, worst of the prompts: {per_layer}: "
            + ("PASS" if check["passed"] and check["read_back_equal"] else "FAIL"))
    return "\n".join(lines)


def _n(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _gib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / GIB:.2f} GiB"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA device here: pass --device cpu for a smoke run")
    results = measure(args)
    print(report(results), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    check = results["check"]
    return 1 if check is not None and not (check["passed"] and check["read_back_equal"]) else 0


if __name__ == "__main__":
    sys.exit(main())
