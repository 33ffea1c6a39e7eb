"""A harvest's files: `shard_NNNNN.safetensors`, `stats.safetensors`, and
`manifest.json`, written last (spec: "Read the shards", "Read the manifest
and the statistics").

The writer takes the prompts one at a time, in the order of `prompts`, and
never holds more than the prompt in hand: each prompt's tensors go to a
local spool file as they come, with only their names and shapes kept, and a
shard is written to storage (header, then the spooled bytes) when its
`shard_size` prompts are in. A safetensors header names every tensor's
shape before the first byte of data, and a prompt's token count is known
only once its rows are read, so the spool is what lets a shard stream.
The statistics are merged prompt by prompt (Chan's parallel form of
Welford's update, in float64) over the numbers the files hold.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import struct
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

from deployments.tensor_codec import bfloat16_bits_to_float32
from harvest.safetensors_header import safetensors_header
from harvest.storage import HarvestStorage, shard_name

LAYOUT_VERSION = 2
RESIDUAL_STREAM_CONVENTION = (
    "block_output: Layer k is the output of decoder block k (counted from 0), before the model's final norm; "
    "the last Layer is before the final norm too"
)
# The keys of the spec's manifest table ("Read the manifest and the statistics").
MANIFEST_KEYS = (
    "run_id", "layout_version", "model_id", "model_identity", "runtime", "dtype", "contents",
    "add_special_tokens", "layer_indices", "residual_stream_convention", "prompts", "shards",
    "mean_token_norm", "batch_size",
)
COPY_CHUNK = 1 << 20
# safetensors' own names of the types, and the names the manifest gives them.
ST_DTYPE = {np.dtype(np.uint16): "BF16", np.dtype(np.float32): "F32", np.dtype(np.int32): "I32"}
MANIFEST_DTYPE = {"BF16": "bfloat16", "F32": "float32", "I32": "int32"}


def to_bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> the bits of the nearest bfloat16 (round half to even, as torch
    rounds), as uint16. NaN stays a (quiet) NaN."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(values)
    if nan.any():
        rounded[nan] = ((bits[nan] >> 16) | 0x0040).astype(np.uint16)
    return rounded


def packed_values(rows: np.ndarray, projecting: bool) -> np.ndarray:
    """The engine's rows as the files hold them: bfloat16 bits, or float32 projections. Rows that
    are bfloat16 bits already (uint16, from a model that runs in bfloat16) go as they are."""
    if projecting:
        return np.ascontiguousarray(rows, dtype=np.float32)
    if rows.dtype == np.uint16:
        return np.ascontiguousarray(rows)
    return to_bfloat16_bits(rows)


@dataclass
class HarvestedPrompt:
    """One prompt's own rows as the files hold them: `values` [layers, tokens, width],
    uint16 bfloat16 bits (activations) or float32 (projections)."""

    index: int
    tokens: np.ndarray  # int32 [tokens]
    values: np.ndarray

    def as_float(self) -> np.ndarray:
        if self.values.dtype == np.uint16:
            return bfloat16_bits_to_float32(self.values)
        return np.asarray(self.values, dtype=np.float32)


def safetensors_bytes(tensors: dict[str, np.ndarray]) -> bytes:
    """A small file in one piece (stats.safetensors)."""
    arrays = [(name, np.ascontiguousarray(a)) for name, a in tensors.items()]
    entries = [(name, ST_DTYPE[a.dtype], list(a.shape), a.nbytes) for name, a in arrays]
    return safetensors_header(entries) + b"".join(a.tobytes() for _, a in arrays)


@dataclass
class Timer:
    """Seconds spent in the `with` blocks, added up."""

    seconds: float = 0.0

    def __enter__(self) -> Timer:
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.seconds += time.perf_counter() - self._t0


class ShardWriter:
    """One shard: tensors spooled as they come, then written to storage in one pass."""

    def __init__(self, index: int, spool_dir: str | None) -> None:
        self.name = shard_name(index)
        self.entries: list[tuple[str, str, list[int], int]] = []
        self.prompt_indices: list[int] = []
        self.spool: IO[bytes] = tempfile.TemporaryFile(dir=spool_dir, prefix="acs-shard-")

    def add(self, prompt: HarvestedPrompt) -> None:
        for name, array in ((f"prompt_{prompt.index}", prompt.values), (f"tokens_{prompt.index}", prompt.tokens)):
            array = np.ascontiguousarray(array)
            self.entries.append((name, ST_DTYPE[array.dtype], list(array.shape), array.nbytes))
            self.spool.write(array.data.cast("B"))
        self.prompt_indices.append(prompt.index)

    def upload(self, storage: HarvestStorage, job_id: str) -> int:
        header = safetensors_header(self.entries, {"format": "pt"})
        self.spool.seek(0)
        with storage.writer(job_id, self.name) as out:
            out.write(header)
            shutil.copyfileobj(self.spool, out, COPY_CHUNK)
        self.spool.close()
        return len(header) + sum(entry[3] for entry in self.entries)

    def describe(self) -> dict[str, Any]:
        return {
            "file": self.name,
            "prompt_indices": self.prompt_indices,
            "tensors": {name: {"dtype": MANIFEST_DTYPE[dtype], "shape": shape}
                        for name, dtype, shape, _ in self.entries},
        }

    def discard(self) -> None:
        self.spool.close()


class StatsAccumulator:
    """mean and std [layers, width] and the mean token norm [layers] over every
    position but each prompt's first, merged one prompt at a time in float64."""

    def __init__(self, n_layers: int, width: int) -> None:
        self.count = 0
        self.mean = np.zeros((n_layers, width), np.float64)
        self.m2 = np.zeros((n_layers, width), np.float64)
        self.norm_sum = np.zeros(n_layers, np.float64)

    def add(self, values: np.ndarray) -> None:
        """values [layers, tokens, width]; position 0 is left out."""
        rows = np.asarray(values[:, 1:, :], dtype=np.float64)
        n_b = rows.shape[1]
        if n_b == 0:
            return
        mean_b = rows.mean(axis=1)
        m2_b = ((rows - mean_b[:, None, :]) ** 2).sum(axis=1)
        n_a, n = self.count, self.count + n_b
        delta = mean_b - self.mean
        self.mean += delta * (n_b / n)
        self.m2 += m2_b + delta**2 * (n_a * n_b / n)
        self.norm_sum += np.sqrt((rows**2).sum(axis=2)).sum(axis=1)
        self.count = n

    def results(self) -> tuple[np.ndarray, np.ndarray, list[float | None]]:
        """mean, std (float32; NaN when no position counted) and the mean norm per Layer."""
        if self.count == 0:
            nan = np.full(self.mean.shape, np.nan, np.float32)
            return nan, nan.copy(), [None] * len(self.norm_sum)
        std = np.sqrt(self.m2 / self.count)
        return self.mean.astype(np.float32), std.astype(np.float32), [float(v) for v in self.norm_sum / self.count]


@dataclass
class WriteTotals:
    n_shards: int = 0
    tokens: int = 0
    bytes_written: int = 0
    save: Timer = field(default_factory=Timer)
    upload: Timer = field(default_factory=Timer)


class OutOfOrder(RuntimeError):
    """A prompt came that is not the next one of `prompts`."""


class HarvestWriter:
    """Writes one harvest's files from its prompts, taken in order."""

    def __init__(self, storage: HarvestStorage, job_id: str, *, n_prompts: int, shard_size: int,
                 layer_indices: list[int], width: int, spool_dir: str | None = None) -> None:
        self.storage, self.job_id = storage, str(uuid.UUID(str(job_id)))
        self.n_prompts, self.shard_size, self.layer_indices = n_prompts, shard_size, list(layer_indices)
        self.width, self.spool_dir = width, spool_dir
        self.stats = StatsAccumulator(len(layer_indices), width)
        self.totals = WriteTotals()
        self.shards: list[dict[str, Any]] = []
        self.current: ShardWriter | None = None
        self.next_index = 0

    @property
    def prompts_done(self) -> int:
        return self.next_index

    def add(self, prompt: HarvestedPrompt) -> None:
        if prompt.index != self.next_index:
            raise OutOfOrder(f"prompt {prompt.index} came where prompt {self.next_index} was due")
        expected = (len(self.layer_indices), len(prompt.tokens), self.width)
        if tuple(prompt.values.shape) != expected:
            raise ValueError(f"prompt {prompt.index} has rows {prompt.values.shape}, not {expected}")
        with self.totals.save:
            shard = self.current
            if shard is None:
                shard = self.current = ShardWriter(len(self.shards), self.spool_dir)
            shard.add(prompt)
            self.stats.add(prompt.as_float())
        self.totals.tokens += len(prompt.tokens)
        self.next_index += 1
        if len(shard.prompt_indices) == self.shard_size or self.next_index == self.n_prompts:
            self._close_shard(shard)

    def _close_shard(self, shard: ShardWriter) -> None:
        """Upload the current shard; the next prompt starts a new one."""
        self.current = None
        with self.totals.upload:
            self.totals.bytes_written += shard.upload(self.storage, self.job_id)
        self.shards.append(shard.describe())
        self.totals.n_shards += 1

    def finish(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Write stats.safetensors, then manifest.json (its shards, norms and counts
        added here); returns the manifest."""
        if self.next_index != self.n_prompts:
            raise RuntimeError(f"{self.next_index} of {self.n_prompts} prompts were written")
        mean, std, norms = self.stats.results()
        with self.totals.save:
            stats = safetensors_bytes({"mean": mean, "std": std,
                                       "layer_indices": np.asarray(self.layer_indices, np.int32)})
        manifest = {**manifest, "shards": self.shards, "mean_token_norm": norms,
                    "n_prompts": self.n_prompts, "shard_size": self.shard_size, "tokens": self.totals.tokens,
                    "stats_positions": "every position but each prompt's first", "stats_count": self.stats.count}
        with self.totals.upload:
            self.totals.bytes_written += self.storage.write(self.job_id, "stats.safetensors", stats)
            text = json.dumps(manifest, indent=1).encode()
            self.totals.bytes_written += self.storage.write(self.job_id, "manifest.json", text)
        return manifest

    def discard(self) -> None:
        if self.current is not None:
            self.current.discard()
            self.current = None


def build_manifest(*, run_id: str, model_id: str, model_identity: str, runtime: dict[str, Any],
                   projecting: bool, add_special_tokens: bool, layer_indices: list[int], prompts: list[str],
                   batch_size: int | None, projection: dict[str, Any] | None = None) -> dict[str, Any]:
    """The manifest's keys that the run knows before the files; HarvestWriter.finish adds the rest."""
    manifest: dict[str, Any] = {
        "run_id": str(run_id),
        "layout_version": LAYOUT_VERSION,
        "model_id": model_id,
        "model_identity": model_identity,
        "runtime": runtime,
        "dtype": "float32" if projecting else "bfloat16",
        "contents": "projections" if projecting else "activations",
        "add_special_tokens": add_special_tokens,
        "layer_indices": list(layer_indices),
        "residual_stream_convention": RESIDUAL_STREAM_CONVENTION,
        "prompts": list(prompts),
        "batch_size": batch_size,
    }
    if projecting:
        manifest["projection"] = projection
    return manifest


def unit_directions(directions: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
    """Each direction scaled to length 1, and the manifest's `projection` entry."""
    raw = np.asarray(directions, dtype=np.float32)
    norms = np.linalg.norm(raw.astype(np.float64), axis=1)
    unit = (raw / norms[:, None]).astype(np.float32)
    return unit, {
        "n_directions": int(unit.shape[0]), "hidden_size": int(unit.shape[1]),
        "scaled_to_unit_length": True, "input_norms": [float(n) for n in norms],
        "unit_directions_sha256": hashlib.sha256(np.ascontiguousarray(unit).tobytes()).hexdigest(),
        "dtype": "float32",
    }
