"""Test-only `compression.zstd` for Python 3.11, from `zstandard`.

The spec's Python programs import `compression.zstd` (Python 3.14). The tests
run them unchanged by putting `tests/shims` on PYTHONPATH. Only the two
functions the programs call exist, with 3.14's behaviour: `compress` writes
one frame that states its size; `decompress` reads every frame of `data`,
whether or not it states its size.
"""
from __future__ import annotations

import io

import zstandard

COMPRESSION_LEVEL_DEFAULT = 3


def compress(data: bytes, level: int | None = None) -> bytes:
    return zstandard.ZstdCompressor(level=COMPRESSION_LEVEL_DEFAULT if level is None else level,
                                    write_content_size=True).compress(data)


def decompress(data: bytes) -> bytes:
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
    return reader.read()
