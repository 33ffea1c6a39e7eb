"""The header of a safetensors file, with the standard library alone: the harvest's shard writer uses
it, and so does the GPU bench (bench/harvest_gpu_sink.py), on a machine that has none of the project's
other dependencies (harvest/shards.py imports zstandard through the tensor codec)."""
from __future__ import annotations

import json
import struct
from typing import Any


def safetensors_header(entries: list[tuple[str, str, list[int], int]],
                       metadata: dict[str, str] | None = None) -> bytes:
    """The 8-byte length and the JSON header of a file whose tensors (name, safetensors
    dtype, shape, byte size) follow back to back, in this order."""
    header: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for name, dtype, shape, size in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # as safetensors' own writer: the data starts 8-aligned
    return struct.pack("<Q", len(text)) + text
