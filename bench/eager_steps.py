"""Eager decode steps against CUDA-graph replays of the same steps, at Llama 3.1 8B's shape.

    python bench/eager_steps.py [--config models/llama-8b-random/config.json] [--device cuda]
        [--batches 1 16 64] [--context 512] [--steps 64] [--warmup 5] [--rounds 5] [--json out.json]

vllm-lens forces every engine eager, because its forward hooks do not fire inside a compiled or
captured graph (DESIGN.md, vllm-lens's traps). What that costs a GPU is the gap between a decode
step launched kernel by kernel from Python and the same step replayed as one CUDA graph. This
bench measures that gap with PyTorch alone, so it runs on a machine that has a GPU and PyTorch but
no vLLM (the lent device machine: issue 14, part 5):

- **The model**: a Llama decoder written out in plain PyTorch (`Llama.step`), with the shape of
  the `--config` (a Hugging Face config.json; Llama 3.1 8B's by default), random bfloat16 weights
  made on the GPU (seed 0) and a static KV cache. Its float32 steps equal Hugging Face's
  `LlamaForCausalLM` on the same weights (tests/unit/test_eager_steps.py).
- **A step**: one decode step of `batch` sequences at position `--context` and on (the cache
  below it holds random keys and values: a step's cost depends on the shapes alone), greedy, the
  next tokens and positions written back on the GPU, so eager steps and graph replays chain alike.
- **Three kinds**, each eager and as a CUDA graph: `plain`; `capture`, every Layer's residual
  stream copied to pinned host memory each step (what a capture asks of vllm-lens); `steer`, one
  vector added to the middle Layer's residual stream.
- **Checks**, for each batch and kind: a graph replay gives the same logits, tokens and captured
  residual streams as the eager step from the same state; a steered step differs from a plain one.

Each round times every kind and mode at every batch, the order rotated from round to round;
it prints the medians: milliseconds a step, eager over graph, and the weights' bytes a step over
the step's time. It also counts the GPU operations (kernels and copies) of one eager plain step (torch.profiler).

This is not vLLM: vLLM's own steps launch fewer kernels (fused RMSNorm with the residual add,
rotary, SiLU-and-mul, paged attention), so its eager steps lose less to launching than these do,
and its scheduler and sampler add host time to both modes. The figures bound what CUDA graphs can
give a decode step of this shape on this GPU; bench/gpu.sh measures vLLM itself where it is installed.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "models" / "llama-8b-random" / "config.json"
KINDS = ("plain", "capture", "steer")
MODES = ("eager", "graph")


@dataclass(frozen=True)
class Shape:
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    eps: float

    @classmethod
    def of(cls, config: dict) -> Shape:
        hidden, heads = config["hidden_size"], config["num_attention_heads"]
        return cls(hidden=hidden, intermediate=config["intermediate_size"], layers=config["num_hidden_layers"],
                   heads=heads, kv_heads=config.get("num_key_value_heads") or heads,
                   head_dim=config.get("head_dim") or hidden // heads, vocab=config["vocab_size"],
                   eps=config.get("rms_norm_eps", 1e-5))


def rope_inv_freq(config: dict, head_dim: int) -> torch.Tensor:
    """Rotary inverse frequencies (float32), with Llama 3's scaling where the config asks for it.

    Transformers 5 keeps the rope's fields in `rope_parameters`; 4.x in `rope_theta` and
    `rope_scaling`: either is read."""
    rope = dict(config.get("rope_scaling") or {})
    rope.update(config.get("rope_parameters") or {})
    base = rope.get("rope_theta", config.get("rope_theta", 10000.0))
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    if rope.get("rope_type", rope.get("type", "default")) != "llama3":
        return inv_freq
    factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
    old_context = rope["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > old_context / low, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= old_context / high) & (wavelen <= old_context / low)
    return torch.where(medium, smoothed, scaled)


@dataclass
class Layer:
    attn_norm: torch.Tensor
    qkv: torch.Tensor       # [q + k + v, hidden], as vLLM fuses them
    o: torch.Tensor
    mlp_norm: torch.Tensor
    gate_up: torch.Tensor   # [2 * intermediate, hidden], as vLLM fuses them
    down: torch.Tensor


@dataclass
class Lens:
    """What a capture or a Steering vector adds to a step, at the residual stream after a Layer
    (vllm-lens's Layer L is Hugging Face's `hidden_states[L + 1]`)."""
    captured: list[torch.Tensor] | None = None   # one host buffer a Layer, [batch, hidden]
    steer_layer: int = -1
    steer_vector: torch.Tensor | None = None     # [hidden], on the device

    def after_layer(self, index: int, h: torch.Tensor) -> torch.Tensor:
        if self.steer_vector is not None and index == self.steer_layer:
            h = h + self.steer_vector
        if self.captured is not None:
            self.captured[index].copy_(h, non_blocking=True)
        return h


@dataclass
class Cache:
    keys: list[torch.Tensor]     # a Layer's [batch, kv_heads, length, head_dim]
    values: list[torch.Tensor]
    rows: torch.Tensor           # arange(batch), for writing one slot per sequence

    @property
    def length(self) -> int:
        return self.keys[0].shape[2]


class Llama:
    def __init__(self, shape: Shape, inv_freq: torch.Tensor, *, dtype: torch.dtype, device: str, seed: int = 0):
        self.shape, self.dtype, self.device = shape, dtype, device
        self.inv_freq = inv_freq.to(device)
        generator = torch.Generator(device=device).manual_seed(seed)

        def weight(*size: int) -> torch.Tensor:
            return torch.empty(size, dtype=dtype, device=device).normal_(0.0, 0.02, generator=generator)

        def norm() -> torch.Tensor:
            return 1.0 + weight(shape.hidden)

        q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
        self.embed = weight(shape.vocab, shape.hidden)
        self.layers = [Layer(attn_norm=norm(), qkv=weight(q + 2 * kv, shape.hidden), o=weight(shape.hidden, q),
                             mlp_norm=norm(), gate_up=weight(2 * shape.intermediate, shape.hidden),
                             down=weight(shape.hidden, shape.intermediate))
                       for _ in range(shape.layers)]
        self.norm = norm()
        self.lm_head = weight(shape.vocab, shape.hidden)

    def weight_bytes(self) -> int:
        tensors = [self.embed, self.norm, self.lm_head]
        tensors += [t for layer in self.layers for t in vars(layer).values()]
        return sum(t.numel() * t.element_size() for t in tensors)

    def new_cache(self, batch: int, length: int, *, fill: bool) -> Cache:
        size = (batch, self.shape.kv_heads, length, self.shape.head_dim)

        def tensor() -> torch.Tensor:
            t = torch.zeros(size, dtype=self.dtype, device=self.device)
            return t.normal_(0.0, 1.0) if fill else t

        return Cache(keys=[tensor() for _ in self.layers], values=[tensor() for _ in self.layers],
                     rows=torch.arange(batch, device=self.device))

    def step(self, tokens: torch.Tensor, positions: torch.Tensor, cache: Cache, lens: Lens | None = None) -> torch.Tensor:
        """Logits [batch, vocab] of one token a sequence at `positions`, its keys and values written
        into `cache`. Nothing here waits for the device, so a CUDA graph can capture it."""
        s = self.shape
        batch = tokens.shape[0]
        h = self.embed[tokens]
        freqs = positions.float()[:, None] * self.inv_freq[None, :]
        angles = torch.cat([freqs, freqs], dim=-1)[:, None, :]
        cos, sin = angles.cos().to(self.dtype), angles.sin().to(self.dtype)
        visible = torch.arange(cache.length, device=self.device)[None, :] <= positions[:, None]
        bias = torch.zeros(visible.shape, dtype=torch.float32, device=self.device).masked_fill(~visible, -math.inf)
        bias = bias[:, None, None, :]
        group = s.heads // s.kv_heads
        q_size, kv_size = s.heads * s.head_dim, s.kv_heads * s.head_dim
        for index, layer in enumerate(self.layers):
            x = F.rms_norm(h, (s.hidden,), layer.attn_norm, s.eps)
            q, k, v = F.linear(x, layer.qkv).split([q_size, kv_size, kv_size], dim=-1)
            q = rotate(q.view(batch, s.heads, s.head_dim), cos, sin)
            k = rotate(k.view(batch, s.kv_heads, s.head_dim), cos, sin)
            cache.keys[index][cache.rows, :, positions] = k
            cache.values[index][cache.rows, :, positions] = v.view(batch, s.kv_heads, s.head_dim)
            # Grouped-query attention of one query a sequence over the whole cache, the unwritten
            # slots masked: the same shapes every step, so a graph replays it at any position.
            q = q.view(batch, s.kv_heads, group, s.head_dim)
            scores = torch.matmul(q, cache.keys[index].transpose(-1, -2)).float() / math.sqrt(s.head_dim)
            weights = torch.softmax(scores + bias, dim=-1).to(self.dtype)
            attended = torch.matmul(weights, cache.values[index]).reshape(batch, q_size)
            h = h + F.linear(attended, layer.o)
            gate, up = F.linear(F.rms_norm(h, (s.hidden,), layer.mlp_norm, s.eps), layer.gate_up).chunk(2, dim=-1)
            h = h + F.linear(F.silu(gate) * up, layer.down)
            if lens is not None:
                h = lens.after_layer(index, h)
        return F.linear(F.rms_norm(h, (s.hidden,), self.norm, s.eps), self.lm_head)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


@dataclass
class Decoder:
    """One batch's state on the device, and one greedy decode step over it; eager and graph
    modes run this same step, so they chain and compare alike."""
    model: Llama
    tokens: torch.Tensor
    positions: torch.Tensor
    cache: Cache
    lens: Lens | None

    def decode(self) -> torch.Tensor:
        logits = self.model.step(self.tokens, self.positions, self.cache, self.lens)
        self.tokens.copy_(logits.argmax(dim=-1))
        self.positions.add_(1)
        return logits

    def reset(self, first_tokens: torch.Tensor, position: int) -> None:
        self.tokens.copy_(first_tokens)
        self.positions.fill_(position)


def make_lens(kind: str, model: Llama, batch: int) -> Lens | None:
    shape = model.shape
    if kind == "capture":
        pinned = model.device != "cpu"
        return Lens(captured=[torch.empty((batch, shape.hidden), dtype=model.dtype, pin_memory=pinned)
                              for _ in range(shape.layers)])
    if kind == "steer":
        vector = torch.randn(shape.hidden, generator=torch.Generator().manual_seed(1)).to(model.device, model.dtype)
        return Lens(steer_layer=shape.layers // 2, steer_vector=vector)
    return None


def capture_graph(decoder: Decoder) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
    """The decode step as a CUDA graph, after warm-up steps on a side stream (as PyTorch asks)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            decoder.decode()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        logits = decoder.decode()
    return graph, logits


def on_gpu(device: str) -> bool:
    return device.startswith("cuda")


def synchronize(device: str) -> None:
    if on_gpu(device):
        torch.cuda.synchronize()


def eager_logits(decoder: Decoder, first_tokens: torch.Tensor, context: int) -> torch.Tensor:
    """The logits (float32, a copy) of one eager step from the timed runs' starting state."""
    decoder.reset(first_tokens, context)
    return decoder.decode().float().clone()


def time_steps(run_step, decoder: Decoder, first_tokens: torch.Tensor, args: argparse.Namespace) -> float:
    """Milliseconds a step, the mean of `args.steps` chained steps after `args.warmup`."""
    decoder.reset(first_tokens, args.context)
    for _ in range(args.warmup):
        run_step()
    synchronize(args.device)
    start = time.perf_counter()
    for _ in range(args.steps):
        run_step()
    synchronize(args.device)
    return (time.perf_counter() - start) * 1000 / args.steps


def check_graph_matches_eager(decoder: Decoder, graph, graph_logits, first_tokens, context: int) -> dict:
    """The graph's step from a state against the eager step from the same state: the cache slot
    each writes is the same, so logits, tokens and captures must agree."""
    eager = eager_logits(decoder, first_tokens, context)
    eager_tokens = decoder.tokens.clone()
    synchronize(decoder.model.device)
    eager_captured = [t.clone() for t in decoder.lens.captured] if decoder.lens and decoder.lens.captured else []
    decoder.reset(first_tokens, context)
    graph.replay()
    synchronize(decoder.model.device)
    result = {"max_abs_logit_diff": (graph_logits.float() - eager).abs().max().item(),
              "tokens_equal": bool(torch.equal(decoder.tokens, eager_tokens)),
              "logits_finite": bool(torch.isfinite(eager).all().item())}
    if eager_captured:
        result["captures_equal"] = all(torch.equal(a, b) for a, b in zip(eager_captured, decoder.lens.captured))
    return result


def count_gpu_ops(decoder: Decoder) -> int | None:
    """The kernels and copies one eager step puts on the GPU, by torch.profiler; None where it cannot tell."""
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            decoder.decode()
            torch.cuda.synchronize()
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        return len(kernels) or None
    except Exception as error:  # the profiler is a figure beside the bench, never its failure
        print(f"kernel count: not measured ({type(error).__name__}: {error})", file=sys.stderr)
        return None


def run_batch(model: Llama, batch: int, args: argparse.Namespace) -> dict:
    length = args.context + args.warmup + args.steps + 8
    cache = model.new_cache(batch, length, fill=True)
    first_tokens = torch.randint(0, model.shape.vocab, (batch,), generator=torch.Generator().manual_seed(batch)).to(model.device)
    use_graphs = on_gpu(args.device)
    decoders, runners, checks = {}, {}, {}
    for kind in KINDS:
        decoder = Decoder(model, first_tokens.clone(), torch.zeros(batch, dtype=torch.long, device=model.device),
                          cache, make_lens(kind, model, batch))
        decoders[kind] = decoder
        runners[(kind, "eager")] = decoder.decode
        if not use_graphs:
            continue
        try:
            graph, logits = capture_graph(decoder)
        except Exception as error:  # a failed capture is reported; the eager figures still stand
            checks[kind] = {"graph_error": f"{type(error).__name__}: {error}"}
            continue
        runners[(kind, "graph")] = graph.replay
        checks[kind] = check_graph_matches_eager(decoder, graph, logits, first_tokens, args.context)
    steer_moves = (eager_logits(decoders["plain"], first_tokens, args.context)
                   - eager_logits(decoders["steer"], first_tokens, args.context)).abs().max().item()

    times: dict[tuple[str, str], list[float]] = {key: [] for key in runners}
    order = list(runners)
    for round_index in range(args.rounds):
        shift = round_index % len(order)
        for kind, mode in order[shift:] + order[:shift]:
            times[(kind, mode)].append(time_steps(runners[(kind, mode)], decoders[kind], first_tokens, args))
    gpu_ops = count_gpu_ops(decoders["plain"]) if use_graphs else None
    return {"batch": batch, "gpu_ops_per_eager_step": gpu_ops, "steer_max_logit_change": steer_moves,
            "checks": checks, "ms": {f"{kind}/{mode}": statistics.median(values) for (kind, mode), values in times.items()},
            "ms_rounds": {f"{kind}/{mode}": values for (kind, mode), values in times.items()}}


def report(result: dict, weight_bytes: int) -> None:
    ms = result["ms"]
    print(f"\nbatch {result['batch']}: GPU operations (kernels, copies) a plain eager step {result['gpu_ops_per_eager_step']}; "
          f"steering moved the logits by up to {result['steer_max_logit_change']:.3g}")
    for kind, check in result["checks"].items():
        print(f"  check {kind}: {check}")
    print(f"  {'kind':<8} {'eager ms':>9} {'graph ms':>9} {'eager/graph':>11} {'GB/s (weights)':>15} {'tok/s eager':>12} {'tok/s graph':>12}")
    for kind in KINDS:
        eager, graph = ms.get(f"{kind}/eager"), ms.get(f"{kind}/graph")
        ratio = f"{eager / graph:.2f}" if graph else "-"
        bandwidth = f"{weight_bytes / graph / 1e6:.0f}" if graph else f"{weight_bytes / eager / 1e6:.0f} (eager)"
        graph_cell = f"{graph:.3f}" if graph else "-"
        graph_rate = f"{result['batch'] * 1000 / graph:.0f}" if graph else "-"
        print(f"  {kind:<8} {eager:>9.3f} {graph_cell:>9} {ratio:>11} {bandwidth:>15} "
              f"{result['batch'] * 1000 / eager:>12.0f} {graph_rate:>12}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="a Hugging Face config.json")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default=None, help="default: bfloat16 on a GPU, float32 on the CPU")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--context", type=int, default=512, help="the position of the first timed step")
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--layers", type=int, default=None, help="fewer Layers than the config's (for a quick run)")
    parser.add_argument("--json", type=Path, default=None)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    config = json.loads(args.config.read_text())
    if args.layers:
        config = {**config, "num_hidden_layers": args.layers}
    shape = Shape.of(config)
    gpu = on_gpu(args.device)
    dtype = getattr(torch, args.dtype) if args.dtype else (torch.bfloat16 if gpu else torch.float32)
    device_name = torch.cuda.get_device_name() if gpu else "cpu"
    print(f"{device_name}, torch {torch.__version__}; {shape}, {dtype}")
    started = time.perf_counter()
    model = Llama(shape, rope_inv_freq(config, shape.head_dim), dtype=dtype, device=args.device)
    synchronize(args.device)
    weight_bytes = model.weight_bytes()
    print(f"weights: {weight_bytes / 1e9:.2f} GB, made in {time.perf_counter() - started:.1f} s")
    results = []
    for batch in args.batches:
        result = run_batch(model, batch, args)
        if gpu:
            torch.cuda.empty_cache()  # the last batch's cache and graphs, before a larger batch's
        report(result, weight_bytes)
        results.append(result)
    summary = {"device": device_name, "torch": torch.__version__, "dtype": str(dtype), "shape": vars(shape),
               "weight_bytes": weight_bytes, "args": {k: str(v) for k, v in vars(args).items()},
               "batches": results}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    main()
