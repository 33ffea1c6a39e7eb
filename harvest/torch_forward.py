"""A harvest's prompt-only forward passes with PyTorch and transformers alone.

    engine = TorchForward.load(weights_folder, device="cuda")  # bfloat16 on a GPU, float32 on a CPU
    rows = await engine.forward(ForwardRequest(request_id, prompts, layers, directions))

Why not vLLM for harvests: vllm-lens captures only a request's first prompt, so the vLLM path runs a
request per prompt, each sampling a token it throws away, and copies its captures off the device per
request and per Layer, from inside hooks, in an engine forced eager. A harvest needs none of that.

How a call runs:
- **Packing.** The prompts are sorted by length, longest first, and cut into batches of at most
  `token_budget` padded tokens. A batch pads only to its own longest prompt, which the sort keeps
  close to its others.
- **No attention mask.** Prompts are padded on the right, and a causal model never lets a token see
  a later one, so the padding changes no real row. Without a mask SDPA takes its causal path (flash
  attention on a GPU).
- **Only the blocks it needs.** A hook on the last Layer read ends the pass there: no later block,
  no final norm, no LM head.
- **Captures.** A forward hook on each Layer read gathers the block's output at the real tokens (and
  projects it onto the unit directions, on the device) into one buffer per batch.
- **Copies.** On a GPU each batch's buffer goes to pinned host memory on a stream of its own while
  the next batch runs, and the prompts' rows are views of it; the call waits once, at its end.

Layer L is the output of decoder block L, before the final norm (the residual stream convention of
every read; HF's `hidden_states[L + 1]` but for the last Layer).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from deployments.checks import ModelFacts
from deployments.engine import ForwardEngine, ForwardRequest, PromptRows
from deployments.lens_checks import check_forward_request

# Padded tokens of one batch. On a GPU large enough to fill it (not measured yet: no device lent). On a
# CPU a pad costs what a real token does, and a call packs only its own prompts (the pipeline's batch:
# 64 prompts in order), so a small budget splits a call by length. A sweep of budgets (2026-12-05, the
# 2-core machine, SmolLM2-135M float32, 2,048 prompts of 4-62 tokens) in calls of 64 prompts: 256 and
# 512 alike, 1024 0.8-0.9 of 512, 4096 and 8192 0.45-0.5 (a call in one batch: 2.9 x the real tokens);
# in calls of 256, 256-1024 alike; in one call of all 2,048, 1024 read 1.07-1.12 x 512 and 512 1.07 x
# 256. 512 stays near the best at every call size.
GPU_TOKEN_BUDGET = 65536
CPU_TOKEN_BUDGET = 512
PAD_ID = 0  # any id the model has: a pad is never seen by a real token


class _Enough(Exception):
    """Raised by the hook of the last Layer read: the rest of the pass is not needed."""


@dataclass
class Batch:
    """Prompts (by their index in the request) that run in one pass, longest first."""

    members: list[int]
    lengths: list[int]

    @property
    def padded_tokens(self) -> int:
        return len(self.members) * self.lengths[0]


def pack(lengths: list[int], token_budget: int) -> list[Batch]:
    """Batches of the prompts, longest first, each of at most `token_budget` padded tokens (a prompt
    longer than the budget runs alone)."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[Batch] = []
    for i in order:
        current = batches[-1] if batches else None
        # Sorted longest first: the batch's first prompt is its longest, so its padded size is known.
        if current is not None and (len(current.members) + 1) * current.lengths[0] <= token_budget:
            current.members.append(i)
            current.lengths.append(lengths[i])
        else:
            batches.append(Batch([i], [lengths[i]]))
    return batches


def decoder_blocks(model: Any) -> Any:
    """The model's decoder blocks: a base model's `layers`, or a causal LM's `model.layers`."""
    if hasattr(model, "layers"):
        return model.layers
    return model.model.layers


def block_output(out: Any) -> torch.Tensor:
    return out[0] if isinstance(out, tuple) else out


@dataclass
class _Capture:
    """One batch in flight: its buffer (on the device, then on the host) and where each prompt's rows are."""

    batch: Batch
    offsets: list[int]
    host: torch.Tensor
    done: Any  # a CUDA event, or None on a CPU


class TorchForward(ForwardEngine):
    """The prompt-only forward of one model held in this process (see the module's doc)."""

    def __init__(self, model: Any, *, model_id: str, max_model_len: int, token_budget: int | None = None) -> None:
        self.model: Any = model.eval()  # None once shut down
        parameter = next(model.parameters())
        self.device, self.dtype = parameter.device, parameter.dtype
        self.on_gpu = self.device.type == "cuda"
        self.token_budget = token_budget or (GPU_TOKEN_BUDGET if self.on_gpu else CPU_TOKEN_BUDGET)
        config = model.config
        self.hidden_size = int(config.hidden_size)
        self.facts = ModelFacts(id=model_id, served_model_name=model_id, max_model_len=max_model_len,
                                n_layers=config.num_hidden_layers, hidden_size=config.hidden_size,
                                vocab_size=config.vocab_size)
        self.blocks = decoder_blocks(model)
        self.copy_stream = torch.cuda.Stream(self.device) if self.on_gpu else None
        # One pass at a time (a second would only fight the first for the device), off the host's
        # event loop, which keeps answering the pipeline's tokenize calls meanwhile.
        self.worker: concurrent.futures.ThreadPoolExecutor | None = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="torch-forward")

    @classmethod
    def load(cls, weights: str, *, model_id: str, max_model_len: int, device: str = "cpu",
             dtype_name: str = "auto", token_budget: int | None = None) -> TorchForward:
        """The model of a weights folder (or hub id): its decoder alone, with SDPA attention. A CPU
        runs float32; a GPU the catalog's dtype (`auto`: bfloat16)."""
        from transformers import AutoModel

        if not device.startswith("cuda"):
            dtype = torch.float32
            # Ray gives an actor with a fraction of a CPU one thread (OMP_NUM_THREADS=1): a harvest
            # host on a CPU gets the cores it may run on.
            torch.set_num_threads(len(os.sched_getaffinity(0)))
        else:
            dtype = torch.bfloat16 if dtype_name == "auto" else getattr(torch, dtype_name)
        model = AutoModel.from_pretrained(weights, torch_dtype=dtype, attn_implementation="sdpa")
        return cls(model.to(device), model_id=model_id, max_model_len=max_model_len, token_budget=token_budget)

    def describe(self) -> dict[str, Any]:
        """What a harvest's manifest records of the engine (HostInfo.runtime)."""
        return {"harvest_engine": "torch", "device": str(self.device), "dtype": str(self.dtype),
                "max_model_len": self.facts.max_model_len, "token_budget": self.token_budget,
                "attention": "sdpa", "threads": torch.get_num_threads()}

    async def forward(self, request: ForwardRequest) -> list[PromptRows]:
        check_forward_request(request, self.facts)
        if self.worker is None:
            raise RuntimeError("the torch forward engine is shut down")
        return await asyncio.get_running_loop().run_in_executor(self.worker, self.forward_now, request)

    def forward_now(self, request: ForwardRequest) -> list[PromptRows]:
        """The forward passes of `request`, in this thread (the GPU bench calls it directly)."""
        if not request.prompts:
            return []
        directions = None
        if request.directions is not None:
            directions = torch.as_tensor(np.ascontiguousarray(request.directions, dtype=np.float32),
                                         device=self.device)
        batches = pack([len(p) for p in request.prompts], self.token_budget)
        with torch.inference_mode():
            captures = [self._run(batch, request, directions) for batch in batches]
        rows: list[PromptRows | None] = [None] * len(request.prompts)
        for capture in captures:
            if capture.done is not None:
                capture.done.synchronize()
            for member, n, offset in zip(capture.batch.members, capture.batch.lengths, capture.offsets):
                rows[member] = PromptRows(list(request.prompts[member]),
                                          _numpy(capture.host[:, offset:offset + n]), str(self.dtype))
        return [r for r in rows if r is not None]

    def _run(self, batch: Batch, request: ForwardRequest, directions: torch.Tensor | None) -> _Capture:
        layers = list(request.layers)
        longest = batch.lengths[0]
        ids = torch.full((len(batch.members), longest), PAD_ID, dtype=torch.long)
        for row, member in enumerate(batch.members):
            ids[row, :batch.lengths[row]] = torch.as_tensor(request.prompts[member], dtype=torch.long)
        real = torch.cat([torch.arange(n) + row * longest for row, n in enumerate(batch.lengths)])
        offsets = np.concatenate([[0], np.cumsum(batch.lengths)[:-1]]).tolist()
        if self.on_gpu:
            ids, real = ids.pin_memory().to(self.device, non_blocking=True), real.to(self.device, non_blocking=True)
        width = self.hidden_size if directions is None else int(directions.shape[0])
        buffer_dtype = self.dtype if directions is None else torch.float32
        buffer = torch.empty((len(layers), len(real), width), dtype=buffer_dtype, device=self.device)
        hooks = [self.blocks[layer].register_forward_hook(self._capture_into(buffer, slot, real, directions,
                                                                            last=slot == len(layers) - 1))
                 for slot, layer in enumerate(layers)]
        try:
            self.model(input_ids=ids, use_cache=False)
        except _Enough:
            pass
        finally:
            for hook in hooks:
                hook.remove()
        return self._to_host(batch, offsets, buffer)

    @staticmethod
    def _capture_into(buffer: torch.Tensor, slot: int, real: torch.Tensor, directions: torch.Tensor | None,
                      last: bool) -> Any:
        def hook(_module: Any, _inputs: Any, out: Any) -> None:
            hidden = block_output(out)
            flat = hidden.reshape(-1, hidden.shape[-1]).index_select(0, real)
            buffer[slot] = flat if directions is None else flat.float() @ directions.T
            if last:
                raise _Enough()
        return hook

    def _to_host(self, batch: Batch, offsets: list[int], buffer: torch.Tensor) -> _Capture:
        if not self.on_gpu:
            return _Capture(batch, offsets, buffer, None)
        assert self.copy_stream is not None
        host = torch.empty(buffer.shape, dtype=buffer.dtype, pin_memory=True)
        self.copy_stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.copy_stream):
            host.copy_(buffer, non_blocking=True)
            done = torch.cuda.Event()
            done.record(self.copy_stream)
        # The buffer was made on the compute stream: the allocator must not hand it out again until the copy ends.
        buffer.record_stream(self.copy_stream)
        return _Capture(batch, offsets, host, done)

    def shutdown(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.shutdown(wait=True)
        self.model = None
        if self.on_gpu:
            torch.cuda.empty_cache()


def _numpy(rows: torch.Tensor) -> np.ndarray:
    """A host tensor's rows as NumPy: float32 as they are, bfloat16 as its bits (uint16), which NumPy
    has no type for. The array keeps the tensor (and its pinned memory) alive."""
    if rows.dtype == torch.bfloat16:
        return rows.view(torch.int16).numpy().view(np.uint16)
    return rows.numpy() if rows.dtype == torch.float32 else rows.float().numpy()
