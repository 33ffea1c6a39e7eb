"""The shard writer of bench/harvest_gpu.py: a thread behind a bounded queue, so forward passes and
shard writes overlap, and a forward pass waits only when the writes fall behind by a whole queue.

The files are harvest/shards.py's: `shard_NNNNN.safetensors`, each `prompt_<i>` ([layers, tokens,
hidden] bfloat16, or float32 from a model run in float32) and `tokens_<i>` (int32), header metadata
`{"format": "pt"}`. They are written here and not by harvest.shards.ShardWriter for two reasons: that
module imports the tensor codec (zstandard), which the lent GPU machine does not have; and a shard
written straight from the engine's rows (header, then each Layer's rows as they lie in pinned memory)
copies nothing, and releases the GIL in every write, so the forward thread keeps launching kernels.
Each shard is fsynced, so the write rate is the disk's and not the page cache's.
"""
from __future__ import annotations

import json
import os
import queue
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harvest.safetensors_header import safetensors_header

# safetensors' names of the types the engine's rows and the token ids come in.
ST_DTYPE = {np.dtype(np.uint16): "BF16", np.dtype(np.float32): "F32", np.dtype(np.int32): "I32"}
PUT_POLL_S = 1.0  # how often a producer blocked on a full queue looks for a writer that died


def shard_name(index: int) -> str:
    """harvest/storage.py's name of shard `index` (that module imports pyarrow.fs)."""
    return f"shard_{index:05d}.safetensors"


@dataclass
class DonePrompt:
    """One prompt's rows as the engine gave them (uint16 bfloat16 bits or float32), and its token ids."""

    index: int
    tokens: np.ndarray  # int32 [tokens]
    rows: np.ndarray  # [layers, tokens, width]


@dataclass
class SinkTotals:
    shards: int = 0
    prompts: int = 0
    bytes: int = 0
    write_s: float = 0.0  # in open, write, fsync: the disk's time
    put_wait_s: float = 0.0  # producers blocked on a full queue: the writes did not keep up
    idle_s: float = 0.0  # the writer waiting for rows: the forward passes did not keep up


class ShardSink:
    """Takes the prompts of each forward call in the order they finish and writes them `shard_size` to a
    shard (the last shard may hold fewer). The first `read_back` prompts written are read back from
    their shard with safetensors' own reader, for the bench's check."""

    def __init__(self, folder: Path, *, shard_size: int, queue_calls: int, keep: bool, read_back: int) -> None:
        self.folder, self.shard_size, self.keep, self.read_back_count = folder, shard_size, keep, read_back
        self.queue: queue.Queue[list[DonePrompt] | None] = queue.Queue(maxsize=queue_calls)
        self.totals = SinkTotals()
        self.read_back: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # index -> (token ids, rows), from the file
        self.read_back_equal = True  # every prompt read back has the very bits it was written with
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="shard-writer", daemon=True)
        self._thread.start()

    def put(self, prompts: list[DonePrompt]) -> None:
        started = time.perf_counter()
        while True:
            self._raise_if_failed()
            try:
                self.queue.put(prompts, timeout=PUT_POLL_S)
                break
            except queue.Full:
                continue
        self.totals.put_wait_s += time.perf_counter() - started

    def close(self) -> None:
        """Write what is left (the last shard may be short) and stop the thread."""
        self.put_end()
        self._thread.join()
        self._raise_if_failed()

    def put_end(self) -> None:
        while self._thread.is_alive():
            try:
                self.queue.put(None, timeout=PUT_POLL_S)
                return
            except queue.Full:
                continue

    def _raise_if_failed(self) -> None:
        if self.error is not None:
            raise RuntimeError("the shard writer failed") from self.error

    def _run(self) -> None:
        pending: list[DonePrompt] = []
        try:
            while True:
                waited = time.perf_counter()
                item = self.queue.get()
                self.totals.idle_s += time.perf_counter() - waited
                if item is None:
                    break
                pending.extend(item)
                while len(pending) >= self.shard_size:
                    self._write(pending[:self.shard_size])
                    pending = pending[self.shard_size:]
            if pending:
                self._write(pending)
        except BaseException as error:  # the producer raises it at its next put
            self.error = error

    def _write(self, prompts: list[DonePrompt]) -> None:
        path = self.folder / shard_name(self.totals.shards)
        entries: list[tuple[str, str, list[int], int]] = []
        for prompt in prompts:
            entries.append((f"prompt_{prompt.index}", ST_DTYPE[prompt.rows.dtype], list(prompt.rows.shape),
                            prompt.rows.nbytes))
            entries.append((f"tokens_{prompt.index}", "I32", [len(prompt.tokens)], prompt.tokens.nbytes))
        header = safetensors_header(entries, {"format": "pt"})
        started = time.perf_counter()
        with open(path, "wb") as out:
            out.write(header)
            for prompt in prompts:
                for layer_rows in prompt.rows:  # each Layer's rows are contiguous in the engine's buffer
                    out.write(np.ascontiguousarray(layer_rows).data.cast("B"))
                out.write(np.ascontiguousarray(prompt.tokens).data.cast("B"))
            out.flush()
            os.fsync(out.fileno())
        self.totals.write_s += time.perf_counter() - started
        self.totals.bytes += len(header) + sum(entry[3] for entry in entries)
        self.totals.shards += 1
        self.totals.prompts += len(prompts)
        self._read_back(path, prompts)
        if not self.keep:
            path.unlink()

    def _read_back(self, path: Path, prompts: list[DonePrompt]) -> None:
        wanted = prompts[:max(self.read_back_count - len(self.read_back), 0)]
        if not wanted:
            return
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as shard:
            for prompt in wanted:
                rows = rows_as_numpy(shard.get_tensor(f"prompt_{prompt.index}"))
                tokens = shard.get_tensor(f"tokens_{prompt.index}").numpy()
                equal = np.array_equal(rows, prompt.rows) and np.array_equal(tokens, prompt.tokens)
                self.read_back_equal = self.read_back_equal and equal
                self.read_back[prompt.index] = (tokens, rows)


def rows_as_numpy(tensor: object) -> np.ndarray:
    """A tensor read with safetensors' torch reader as the engine hands rows over: bfloat16 as its
    bits (uint16), float32 as it is."""
    import torch

    assert isinstance(tensor, torch.Tensor)
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(np.uint16)
    return tensor.numpy()
