"""A harvest's prompt-only forward passes with PyTorch and transformers alone.

    engine = TorchForward.load(weights_folder, device="cuda")  # bfloat16 on a GPU, float32 on a CPU
    rows = await engine.forward(ForwardRequest(request_id, prompts, layers, directions))

Why not vLLM for harvests: vllm-lens captures only a request's first prompt, so the vLLM path runs a
request per prompt, each sampling a token it throws away, and copies its captures off the device per
request and per Layer, from inside hooks, in an engine forced eager. A harvest needs none of that.

How a call runs:
- **Packing.** The prompts are sorted by length, longest first, and cut into batches of at most
  `token_budget` padded tokens. A batch's rows are as wide as its longest prompt, which the sort
  keeps close to its others. On a CPU, where a pad costs what a real token does, a row holds several
  prompts end to end (first fit, longest first), its position ids restarting at each: transformers
  then masks each prompt off from the others in its row (its packed sequences). A GPU keeps a prompt
  a row, and the causal path of its attention.
- **No attention mask.** Prompts are padded on the right, and a causal model never lets a token see
  a later one, so the padding changes no real row. Without a mask SDPA takes its causal path (flash
  attention on a GPU). Shared rows add only the packed sequences' mask (the pads a sequence of their
  own), which the engine checks on its model when it starts, else it gives each prompt a row.
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
import logging
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from deployments.checks import ModelFacts
from deployments.engine import ForwardEngine, ForwardRequest, PromptRows
from deployments.lens_checks import check_forward_request

# Padded tokens of one batch. On a GPU large enough to fill it (not measured yet: no device lent). On a
# CPU a call packs only its own prompts (the pipeline's batch: 64 prompts in order); with shared rows
# a batch pads little at any budget, and the budget trades fewer passes over the weights against
# activations that outgrow the caches. `bench/harvest.py --prompts 1024 --token-budgets 512 2048 8192
# --rows shared own` (2026-12-05, the 2-core machine, SmolLM2-135M float32, calls of 64 prompts; best
# of 2 rounds, bench/NOTES.md): shared rows 985 tokens/s at 2048, 0.87 of that at 512 and 0.93 at
# 8192; a row each 0.76 at 512, 0.52 at 2048 and 0.31 at 8192 (a call in one batch pads to 2.8 x).
GPU_TOKEN_BUDGET = 65536
CPU_TOKEN_BUDGET = 2048
PAD_ID = 0  # any id the model has: a pad is never seen by a real token
# A prompt that shares a row reads what it reads alone within rounding (float32: 1e-7 of the largest
# value; bfloat16 rounds at 2^-8 a block); one that saw the prompt before it reads something else.
SHARED_ROW_TOLERANCE = 0.05

log = logging.getLogger(__name__)


class _Enough(Exception):
    """Raised by the hook of the last Layer read: the rest of the pass is not needed."""


@dataclass
class Batch:
    """Prompts (by their index in the request) that run in one pass, longest first, and the rows they
    fill: each row the positions in `members` of the prompts it holds end to end (one by default)."""

    members: list[int]
    lengths: list[int]
    rows: list[list[int]] = field(default_factory=list)

    @property
    def padded_tokens(self) -> int:
        return len(self.rows) * self.lengths[0]

    @property
    def shares_rows(self) -> bool:
        return len(self.rows) < len(self.members)


def pack(lengths: list[int], token_budget: int, share_rows: bool = False) -> list[Batch]:
    """Batches of the prompts, longest first, each of at most `token_budget` padded tokens (a prompt
    longer than the budget runs alone). With `share_rows` a prompt goes into the first row of the
    batch with room for it before it opens a row."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[Batch] = []
    room: list[int] = []  # tokens left in each row of the last batch
    for i in order:
        n = lengths[i]
        row = next((r for r, left in enumerate(room) if left >= n), None) if share_rows else None
        if row is None:
            # Sorted longest first: a batch's first prompt is its longest, so its rows' width is known.
            if not batches or (len(batches[-1].rows) + 1) * batches[-1].lengths[0] > token_budget:
                batches.append(Batch([], []))
                room = []
            width = batches[-1].lengths[0] if batches[-1].members else n
            batches[-1].rows.append([])
            room.append(width)
            row = len(room) - 1
        batch = batches[-1]
        batch.rows[row].append(len(batch.members))
        batch.members.append(i)
        batch.lengths.append(n)
        room[row] -= n
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

    def __init__(self, model: Any, *, model_id: str, max_model_len: int, token_budget: int | None = None,
                 share_rows: bool | None = None) -> None:
        self.model: Any = model.eval()  # None once shut down
        parameter = next(model.parameters())
        self.device, self.dtype = parameter.device, parameter.dtype
        self.on_gpu = self.device.type == "cuda"
        self.token_budget = token_budget or (GPU_TOKEN_BUDGET if self.on_gpu else CPU_TOKEN_BUDGET)
        # Prompts share rows on a CPU (default), if the model keeps them apart.
        self.share_rows = (not self.on_gpu if share_rows is None else share_rows) and self._keeps_shared_apart()
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
             dtype_name: str = "auto", token_budget: int | None = None, share_rows: bool | None = None
             ) -> TorchForward:
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
        model = AutoModel.from_pretrained(weights, dtype=dtype, attn_implementation="sdpa")
        return cls(model.to(device), model_id=model_id, max_model_len=max_model_len, token_budget=token_budget,
                   share_rows=share_rows)

    def _keeps_shared_apart(self) -> bool:
        """Whether a prompt that shares a row reads what it reads alone: the model's attention honours
        position ids that restart (transformers' packed sequences). A model that ignored them would let
        a prompt see the one before it in its row."""
        first, second = [5, 6, 7, 8], [9, 10, 11]
        with torch.inference_mode():
            # The model's first output: the last hidden state of a base model (a causal LM's logits)
            alone = self.model(input_ids=torch.tensor([second], device=self.device), use_cache=False)[0]
            shared = self.model(
                input_ids=torch.tensor([first + second], device=self.device), use_cache=False,
                position_ids=torch.tensor([[*range(len(first)), *range(len(second))]], device=self.device),
            )[0][:, len(first):]
        error = float((shared.float() - alone.float()).abs().max() / alone.float().abs().max())
        if error > SHARED_ROW_TOLERANCE:
            log.warning("prompts do not share rows: the model lets a prompt see another in its row "
                        "(relative error %.3g)", error)
            return False
        return True

    def describe(self) -> dict[str, Any]:
        """What a harvest's manifest records of the engine (HostInfo.runtime)."""
        return {"harvest_engine": "torch", "device": str(self.device), "dtype": str(self.dtype),
                "max_model_len": self.facts.max_model_len, "token_budget": self.token_budget,
                "share_rows": self.share_rows, "attention": "sdpa", "threads": torch.get_num_threads()}

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
        batches = pack([len(p) for p in request.prompts], self.token_budget, self.share_rows)
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
        row_width = batch.lengths[0]
        ids = torch.full((len(batch.rows), row_width), PAD_ID, dtype=torch.long)
        # Position ids restart at each prompt of a row, and at its pads (a sequence of their own).
        positions = torch.zeros((len(batch.rows), row_width), dtype=torch.long) if batch.shares_rows else None
        starts = [0] * len(batch.members)  # where each member's first token is in the flattened batch
        for row, held in enumerate(batch.rows):
            at = 0
            for k in held:
                n = batch.lengths[k]
                ids[row, at:at + n] = torch.as_tensor(request.prompts[batch.members[k]], dtype=torch.long)
                if positions is not None:
                    positions[row, at:at + n] = torch.arange(n)
                starts[k] = row * row_width + at
                at += n
            if positions is not None:
                positions[row, at:] = torch.arange(row_width - at)
        real = torch.cat([torch.arange(n) + start for start, n in zip(starts, batch.lengths)])
        offsets = np.concatenate([[0], np.cumsum(batch.lengths)[:-1]]).tolist()
        if self.on_gpu:
            ids, real = ids.pin_memory().to(self.device, non_blocking=True), real.to(self.device, non_blocking=True)
            if positions is not None:
                positions = positions.pin_memory().to(self.device, non_blocking=True)
        width = self.hidden_size if directions is None else int(directions.shape[0])
        buffer_dtype = self.dtype if directions is None else torch.float32
        buffer = torch.empty((len(layers), len(real), width), dtype=buffer_dtype, device=self.device)
        hooks = [self.blocks[layer].register_forward_hook(self._capture_into(buffer, slot, real, directions,
                                                                            last=slot == len(layers) - 1))
                 for slot, layer in enumerate(layers)]
        try:
            self.model(input_ids=ids, use_cache=False, position_ids=positions)
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
