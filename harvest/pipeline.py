"""One harvest's Ray Data pipeline:

    read the prompts (with their indexes)
      -> tokenize with the model's tokenizer (tasks that ask the model host,
         which keeps it loaded), keeping the first max_model_len - 1 tokens
      -> forward prompt-only through the model host (an actor pool of thin
         clients of the detached ModelHost, which holds the model)
      -> back in the order of `prompts`, one prompt at a time, to `on_prompt`
         (the shard writer).

Rows of different lengths travel as bytes, with their token counts: a Ray
Data column of variable-shape tensors would pad or copy them. Each prompt's
rows are checked to be its own (its token ids, its shape) before they leave
the pool. Memory is bounded by a batch: the consumer pulls blocks as it
writes them, and Ray Data's backpressure holds the rest of the pipeline.
"""
from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np
import ray

from deployments.engine import ForwardRequest
from harvest.shards import HarvestedPrompt, packed_values


class PipelineStopped(Exception):
    """`should_stop` asked the pipeline to end (a cancel, or the time limit)."""


@dataclass
class PipelineSettings:
    """How the pipeline runs (Inference sizes its own batches; `batch_size` of the
    request is kept in the manifest only)."""

    batch_prompts: int = 64  # prompts of one Ray Data batch (the host batches 64 sequences a step)
    # One forward call carries at most this many float32 bytes of rows, so a
    # batch of long prompts goes to the model in pieces.
    forward_bytes: int = 256 << 20
    pool_size: int = 2  # forward clients: one call in flight while the other's rows pack
    actor_cpus: float = 0.125  # fractional: Ray Data waits forever for CPUs that replicas hold
    tokenizer_cpus: float = 0.125


@dataclass
class PipelineTask:
    job_id: str
    prompts: list[str]
    layers: list[int]
    add_special_tokens: bool
    max_prompt_tokens: int  # max_model_len - 1
    width: int  # hidden size, or the number of directions
    host_name: str
    host_namespace: str
    directions: np.ndarray | None = None  # unit vectors [k, hidden]
    settings: PipelineSettings = field(default_factory=PipelineSettings)


@dataclass
class PipelineTimes:
    pipeline_started_at: float = 0.0  # time.time() when the dataset was built
    forward_started_at: float | None = None  # the first forward call's start
    forward_ended_at: float | None = None  # the last forward call's end

    @property
    def forward_s(self) -> float:
        if self.forward_started_at is None or self.forward_ended_at is None:
            return 0.0
        return self.forward_ended_at - self.forward_started_at


def tokenize_batch(batch: dict[str, np.ndarray], host_name: str, namespace: str, add_special_tokens: bool,
                   max_tokens: int) -> dict[str, np.ndarray]:
    """Ray Data stage: text -> token ids (int32 bytes), cut to the context, by the model's
    tokenizer (transformers' AutoTokenizer of tokenizer_path()), which the model host keeps
    loaded: a stage of its own would import transformers and load it again for each harvest."""
    host = ray.get_actor(host_name, namespace=namespace)
    tokens = ray.get(host.tokenize.remote([str(t) for t in batch["text"]], add_special_tokens, max_tokens))
    return {"index": np.asarray(batch["index"], dtype=np.int64), "tokens": _objects(tokens)}


def forward_chunks(lengths: list[int], per_token_bytes: int, budget: int) -> Iterator[slice]:
    """Consecutive runs of prompts whose rows fit `budget` bytes (one prompt at least)."""
    start, used = 0, 0
    for i, n in enumerate(lengths):
        size = n * per_token_bytes
        if i > start and used + size > budget:
            yield slice(start, i)
            start, used = i, 0
        used += size
    if start < len(lengths):
        yield slice(start, len(lengths))


def _objects(values: list[bytes]) -> np.ndarray:
    column = np.empty(len(values), dtype=object)
    column[:] = values
    return column


class Forward:
    """Ray Data stage: a client of the model host; token ids -> each prompt's rows,
    bfloat16 bits (or float32 projections) as bytes."""

    def __init__(self, host_name: str, namespace: str, layers: list[int], directions: np.ndarray | None,
                 width: int, forward_bytes: int) -> None:
        self.host = ray.get_actor(host_name, namespace=namespace)
        self.layers, self.directions, self.width = list(layers), directions, width
        self.forward_bytes = forward_bytes
        self.nonce = uuid.uuid4().hex[:8]

    def __call__(self, batch: dict[str, np.ndarray]) -> Iterator[dict[str, np.ndarray]]:
        indexes = [int(i) for i in batch["index"]]
        prompts = [np.frombuffer(raw, dtype=np.int32) for raw in batch["tokens"]]
        per_token = len(self.layers) * self.width * 4
        for part in forward_chunks([len(p) for p in prompts], per_token, self.forward_bytes):
            yield self._forward(indexes[part], prompts[part])

    def _forward(self, indexes: list[int], prompts: list[np.ndarray]) -> dict[str, np.ndarray]:
        request = ForwardRequest(f"harvest-{self.nonce}-{indexes[0]}", [p.tolist() for p in prompts],
                                 self.layers, self.directions)
        started = time.time()
        rows = ray.get(self.host.forward.remote(request))
        ended = time.time()
        if len(rows) != len(prompts):
            raise RuntimeError(f"the engine answered {len(rows)} prompts for {len(prompts)}")
        values = []
        for index, ids, got in zip(indexes, prompts, rows):
            expected = (len(self.layers), len(ids), self.width)
            if list(got.token_ids) != ids.tolist() or tuple(got.rows.shape) != expected:
                raise RuntimeError(f"prompt {index}: the engine answered rows {tuple(got.rows.shape)} of "
                                   f"{len(got.token_ids)} tokens for {expected}")
            values.append(packed_values(got.rows, self.directions is not None).tobytes())
        n = len(indexes)
        return {"index": np.asarray(indexes, dtype=np.int64),
                "tokens": _objects([p.tobytes() for p in prompts]), "values": _objects(values),
                "started": np.full(n, started), "ended": np.full(n, ended)}


def build_dataset(task: PipelineTask) -> Any:
    from ray.data import ActorPoolStrategy

    s = task.settings
    items = [{"index": i, "text": text} for i, text in enumerate(task.prompts)]
    blocks = max(1, math.ceil(len(items) / s.batch_prompts))
    dataset = ray.data.from_items(items, override_num_blocks=blocks)
    # Ray types `fn` as a one-argument function of any batch format; fn_args and batch_format="numpy"
    # make this one right, which its stubs cannot say.
    dataset = dataset.map_batches(
        tokenize_batch,  # pyright: ignore[reportArgumentType]
        fn_args=(task.host_name, task.host_namespace, task.add_special_tokens, task.max_prompt_tokens),
        batch_size=s.batch_prompts, batch_format="numpy", num_cpus=s.tokenizer_cpus,
    )
    return dataset.map_batches(
        Forward, fn_constructor_args=(task.host_name, task.host_namespace, task.layers, task.directions,
                                      task.width, s.forward_bytes),
        batch_size=s.batch_prompts, batch_format="numpy", compute=ActorPoolStrategy(size=s.pool_size),
        num_cpus=s.actor_cpus,
    )


def configure_data_context() -> None:
    from ray.data import DataContext

    context = DataContext.get_current()
    context.execution_options.preserve_order = True  # rows come back in the order of `prompts`
    context.enable_progress_bars = False
    context.enable_auto_log_stats = False
    context.print_on_execution_start = False


def _prompts_of(block: dict[str, np.ndarray], task: PipelineTask) -> Iterator[HarvestedPrompt]:
    projecting = task.directions is not None
    for index, raw_tokens, raw_values in zip(block["index"], block["tokens"], block["values"]):
        tokens = np.frombuffer(raw_tokens, dtype=np.int32)
        values = np.frombuffer(raw_values, dtype=np.float32 if projecting else np.uint16)
        yield HarvestedPrompt(int(index), tokens, values.reshape(len(task.layers), len(tokens), task.width))


def run_pipeline(task: PipelineTask, on_prompt: Callable[[HarvestedPrompt], None],
                 should_stop: Callable[[], bool] = lambda: False,
                 on_forward_started: Callable[[float], None] = lambda at: None) -> PipelineTimes:
    """Run the pipeline to its end, handing each prompt to `on_prompt` in index order.

    Raises PipelineStopped when `should_stop()` turns true (checked for each block).
    """
    configure_data_context()
    times = PipelineTimes(pipeline_started_at=time.time())
    pending: dict[int, HarvestedPrompt] = {}  # preserve_order makes it a formality; kept as a guard
    next_index = 0
    blocks = iter(build_dataset(task).iter_batches(batch_size=None, batch_format="numpy", prefetch_batches=1))
    try:
        for block in blocks:
            if should_stop():
                raise PipelineStopped()
            first = float(block["started"].min())
            if times.forward_started_at is None:
                on_forward_started(first)
            times.forward_started_at = min(times.forward_started_at or first, first)
            times.forward_ended_at = max(times.forward_ended_at or 0.0, float(block["ended"].max()))
            for prompt in _prompts_of(block, task):
                pending[prompt.index] = prompt
                while next_index in pending:
                    on_prompt(pending.pop(next_index))
                    next_index += 1
    finally:
        close = getattr(blocks, "close", None)
        if close is not None:
            close()  # ends the execution (and its actor pools) when the run stops early
    if next_index != len(task.prompts):
        raise RuntimeError(f"the pipeline gave {next_index} of {len(task.prompts)} prompts")
    return times
