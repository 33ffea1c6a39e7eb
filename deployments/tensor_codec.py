"""The tensor encoding of Activations and encoded Steering vectors.

As "Decode the tensor" describes it: the array's bytes in C order, one
zstd frame, base64; `dtype` is the NumPy type of the bytes. A bfloat16
model's numbers travel as int16 holding the bfloat16 bits, with
`original_dtype` "torch.bfloat16", because NumPy has no bfloat16.
"""
from __future__ import annotations

import base64
from typing import Any

import numpy as np
import zstandard

BFLOAT16 = "torch.bfloat16"
FLOAT32 = "torch.float32"
_COMPRESSOR = zstandard.ZstdCompressor(level=3, write_content_size=True)


class TensorError(ValueError):
    """An encoded tensor that cannot be read; the message says why. The API answers it as the
    400 of an encoded Steering vector (domain/error_mapping.py)."""


def encode(array: Any, original_dtype: str) -> dict[str, Any]:
    """A float32 array, or int16 bfloat16 bits with original_dtype torch.bfloat16."""
    array = np.ascontiguousarray(array)
    if original_dtype == BFLOAT16 and array.dtype != np.int16:
        raise TypeError("bfloat16 numbers travel as their int16 bits")
    data = base64.b64encode(_COMPRESSOR.compress(array.tobytes())).decode("ascii")
    return {"data": data, "dtype": str(array.dtype), "original_dtype": original_dtype,
            "shape": list(array.shape), "compression": "zstd"}


def encode_torch(tensor: Any) -> dict[str, Any]:
    """A torch tensor in the model's own precision, as the API answers it."""
    import torch

    tensor = tensor.detach().cpu().contiguous()
    if tensor.dtype == torch.bfloat16:
        return encode(tensor.view(torch.int16).numpy(), BFLOAT16)
    return encode(tensor.to(torch.float32).numpy(), FLOAT32)


def bfloat16_bits_to_float32(bits: np.ndarray) -> np.ndarray:
    """The upper 16 bits of a float32 are a bfloat16: shift them back in place."""
    return (bits.view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def decode(tensor: dict[str, Any], *, max_bytes: int) -> np.ndarray:
    """The float32 array of an encoded tensor; TensorError when it is not what it says."""
    dtype = _dtype_of(tensor)
    raw = _one_frame(tensor.get("data", ""), max_bytes)
    shape = [int(n) for n in tensor["shape"]]
    if len(raw) != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
        raise TensorError(f"its data holds {len(raw)} bytes, not the {shape} {dtype.name} numbers of its shape")
    array = np.frombuffer(raw, dtype=dtype).reshape(shape)
    return bfloat16_bits_to_float32(array) if dtype == np.int16 else array.astype(np.float32, copy=False)


def _dtype_of(tensor: dict[str, Any]) -> np.dtype:
    dtype, original = tensor.get("dtype"), tensor.get("original_dtype")
    if dtype == "float32" and original in (FLOAT32, "float32"):
        return np.dtype(np.float32)
    if dtype == "int16" and original == BFLOAT16:
        return np.dtype(np.int16)
    raise TensorError("dtype is float32, or int16 with original_dtype torch.bfloat16")


def _one_frame(data: str, max_bytes: int) -> bytes:
    """Exactly one zstd frame that states its size, at most `max_bytes` once decompressed."""
    try:
        compressed = base64.b64decode(data, validate=True)
    except (ValueError, TypeError) as error:
        raise TensorError("data is not base64") from error
    try:
        params = zstandard.get_frame_parameters(compressed)
    except zstandard.ZstdError as error:
        raise TensorError("data is not a zstd frame") from error
    size = params.content_size
    if size in (zstandard.CONTENTSIZE_UNKNOWN, zstandard.CONTENTSIZE_ERROR):
        raise TensorError("the zstd frame must state its size")
    if size > max_bytes:
        raise TensorError(f"the zstd frame holds {size} bytes, more than {max_bytes}")
    frame = zstandard.ZstdDecompressor().decompressobj()
    try:
        raw = frame.decompress(compressed)
    except zstandard.ZstdError as error:
        raise TensorError("data is not a whole zstd frame") from error
    # Bytes after the first frame would be dropped without a word: refuse them.
    if frame.unused_data or len(raw) != size:
        raise TensorError("data must be exactly one zstd frame")
    return raw
