"""Ids of ledger rows: UUIDv7, as the spec's ids are (e.g. `01a19d8b-2892-7afa-...`).

Version 7 puts the time first, so new rows land at the end of a B-tree index
instead of at random pages, and ids sort by creation.
"""
from __future__ import annotations

import os
import time
import uuid


def uuid7() -> uuid.UUID:
    """A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then random bits."""
    millis = time.time_ns() // 1_000_000
    value = (millis & (2**48 - 1)) << 80
    value |= int.from_bytes(os.urandom(10), "big") & (2**80 - 1)
    # Version 7 in bits 76-79, variant 0b10 in bits 62-63.
    value = (value & ~(0xF << 76)) | (0x7 << 76)
    value = (value & ~(0x3 << 62)) | (0x2 << 62)
    return uuid.UUID(int=value)
