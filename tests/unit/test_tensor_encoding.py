"""The tensor encoding of "Decode the tensor", read back with the spec's own helper."""
from __future__ import annotations

import base64

import numpy as np
import pytest
import torch
import zstandard

from deployments.tensor_codec import TensorError, decode, encode, encode_torch


def spec_decode(tensor):
    """The spec's `decode` helper, with zstandard in place of Python 3.14's compression.zstd."""
    raw = zstandard.ZstdDecompressor().decompress(base64.b64decode(tensor["data"]))
    array = np.frombuffer(raw, dtype=tensor["dtype"]).reshape(tensor["shape"])
    if tensor["original_dtype"] == "torch.bfloat16":
        array = (array.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return array


def test_float32_round_trips_exactly() -> None:
    values = torch.randn(2, 5, 64, dtype=torch.float32)
    encoded = encode_torch(values)
    assert (encoded["dtype"], encoded["original_dtype"], encoded["shape"]) == ("float32", "torch.float32", [2, 5, 64])
    assert np.array_equal(spec_decode(encoded), values.numpy())


def test_bfloat16_travels_as_int16_bits() -> None:
    values = torch.randn(3, 4, 8).to(torch.bfloat16)
    encoded = encode_torch(values)
    assert (encoded["dtype"], encoded["original_dtype"]) == ("int16", "torch.bfloat16")
    assert np.array_equal(spec_decode(encoded), values.to(torch.float32).numpy())


def test_decode_reads_what_encode_writes() -> None:
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert np.array_equal(decode(encode(values, "torch.float32"), max_bytes=1 << 20), values)


def _frame(raw: bytes, *, with_size: bool = True) -> str:
    return base64.b64encode(zstandard.ZstdCompressor(write_content_size=with_size).compress(raw)).decode()


@pytest.mark.parametrize("tensor,reason", [
    ({"data": "@@", "dtype": "float32", "original_dtype": "torch.float32", "shape": [1]}, "base64"),
    ({"data": _frame(bytes(4)), "dtype": "float16", "original_dtype": "torch.float16", "shape": [1]}, "dtype"),
    ({"data": _frame(bytes(8)), "dtype": "float32", "original_dtype": "torch.float32", "shape": [3]}, "bytes"),
    ({"data": base64.b64encode(zstandard.ZstdCompressor(write_content_size=True).compress(bytes(4)) * 2).decode(),
      "dtype": "float32", "original_dtype": "torch.float32", "shape": [1]}, "one zstd frame"),
])
def test_a_tensor_that_is_not_what_it_says_is_refused(tensor, reason) -> None:
    with pytest.raises(TensorError, match=reason):
        decode(tensor, max_bytes=1 << 20)


def test_a_frame_larger_than_allowed_is_refused_before_it_is_decompressed() -> None:
    tensor = {"data": _frame(bytes(4096)), "dtype": "float32", "original_dtype": "torch.float32", "shape": [1024]}
    with pytest.raises(TensorError, match="more than 1024"):
        decode(tensor, max_bytes=1024)


def test_a_frame_must_state_its_size() -> None:
    tensor = {"data": _frame(bytes(4), with_size=False), "dtype": "float32", "original_dtype": "torch.float32",
              "shape": [1]}
    with pytest.raises(TensorError, match="state its size"):
        decode(tensor, max_bytes=1 << 20)
