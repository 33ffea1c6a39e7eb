"""Strict validation of a POST /v1/harvest body (docs: Harvest Activations, Limits).

`parse_harvest_request` checks what needs no model: unknown fields, types,
ranges, the prompts' caps and the bytes of `project_onto`. `fit_to_model`
then checks the Layers and the directions against the model and says what
the harvest reads and holds. Both raise InvalidRequest with the spec's
message and `param`, in the style and with the helpers of Completion
validation (domain/completions/validation.py).

Rules where the spec is silent:
- A field sent as null gets its default, as for every route (DESIGN.md).
- Characters are Unicode code points, as Python counts them; the 2,000,000
  cap counts them / 4, rounded up.
- `layers` counts its 1 to 256 as sent; a repeated Layer is read once.
- `project_onto.data` may be sent without its `=` padding.
"""
from __future__ import annotations

import base64
import binascii
import math
import re
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from domain.completions.validation import (
    Msg, bad_type, bad_value, boolean, integer, reject_unknown, required, text,
)
from domain.errors import InvalidRequest

MAX_PROMPTS = 4096
MAX_PROMPT_TOKENS = 2_000_000  # counted as characters / 4
MAX_LAYERS = 256
MAX_SHARD_SIZE = 4096
DEFAULT_SHARD_SIZE = 32
MAX_BATCH_SIZE = 64
MAX_DIRECTIONS = 64
DTYPES = {"float32": 4, "float16": 2, "bfloat16": 2}


class HarvestMsg:
    """The messages of harvest validation; (spec) marks the spec's own words."""

    LAYER = "{model} has layers 0 to {last}: it has no layer {layer}."  # spec
    PROMPTS_CAP = (
        "At most 2000000 tokens of prompts in one harvest, counted as characters / 4: "
        "the prompts have {chars} characters, {tokens} tokens."
    )
    DATA_SIZE = "project_onto.data is {size} bytes; the shape {k} \u00d7 {hidden} of {dtype} needs {needed}."  # spec
    NOT_FINITE = "project_onto has numbers that are not finite."  # spec
    ZERO_DIRECTION = "project_onto has a direction whose length is 0."  # spec
    NOT_BASE64 = "project_onto.data is not valid base64."  # spec
    HIDDEN_SIZE = "A direction of project_onto has {count} numbers, but the model's hidden size is {hidden}."


@dataclass(frozen=True)
class Projection:
    """`project_onto`, decoded: float32 `[directions, hidden]` as sent (not yet of length 1)."""

    data: str  # the base64 text, without spaces, line breaks or missing padding
    dtype: str
    directions: np.ndarray

    def as_json(self) -> dict[str, Any]:
        return {"data": self.data, "dtype": self.dtype, "shape": list(self.directions.shape),
                "compression": "none"}


@dataclass(frozen=True)
class HarvestRequest:
    model: str
    prompts: list[str]
    layers: list[int] | Literal["all"] | None  # a list, "all", or None for the quartiles
    shard_size: int
    batch_size: int | None
    add_special_tokens: bool
    project_onto: Projection | None
    utf8_bytes: int  # of all prompts together

    @property
    def reserved_tokens(self) -> int:
        """The Hold: each prompt's UTF-8 bytes, and 1 more for its start token (spec)."""
        return self.utf8_bytes + (len(self.prompts) if self.add_special_tokens else 0)


@dataclass(frozen=True)
class HarvestPlan:
    """A request fitted to its model: the Layers it reads, ascending, and what it holds."""

    request: HarvestRequest
    model: Any  # deployments.catalog.ModelSpec
    layers: list[int]

    @property
    def reserved_tokens(self) -> int:
        return self.request.reserved_tokens

    def normalized(self) -> dict[str, Any]:
        """The request as the Runner runs it (the `work` row's `request`)."""
        r = self.request
        return {"model": r.model, "prompts": r.prompts, "layers": self.layers, "shard_size": r.shard_size,
                "batch_size": r.batch_size, "add_special_tokens": r.add_special_tokens,
                "project_onto": None if r.project_onto is None else r.project_onto.as_json()}


# The fields --------------------------------------------------------------------------


def _prompts(v: object, path: str) -> tuple[list[str], int]:
    """The texts and their UTF-8 bytes in all."""
    if not isinstance(v, list):
        raise bad_type(path, "a list of strings")
    if not 1 <= len(v) <= MAX_PROMPTS:
        raise bad_value(path, f"a list of 1 to {MAX_PROMPTS} texts")
    size = chars = 0
    for i, prompt in enumerate(v):
        item = f"{path}[{i}]"
        text(prompt, item)  # a string, without NUL
        if not prompt:
            raise bad_value(item, "a text of 1 or more characters")
        size += len(prompt.encode("utf-8"))  # api/body.py refused every lone surrogate already
        chars += len(prompt)
    if chars > 4 * MAX_PROMPT_TOKENS:
        raise InvalidRequest(HarvestMsg.PROMPTS_CAP.format(chars=chars, tokens=math.ceil(chars / 4)), path)
    return v, size


def _layers(v: object, path: str) -> list[int] | Literal["all"]:
    if isinstance(v, str):
        if v != "all":
            raise bad_value(path, "a list of numbers or 'all'")
        return "all"
    if not isinstance(v, list):
        raise bad_type(path, "a list of numbers or 'all'")
    if not 1 <= len(v) <= MAX_LAYERS:
        raise bad_value(path, f"a list of 1 to {MAX_LAYERS} Layers")
    return sorted({integer(x, f"{path}[{i}]", ge=0) for i, x in enumerate(v)})


_WHITESPACE = re.compile(r"[ \t\r\n]")
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


def _base64(value: str) -> tuple[str, bytes]:
    """The text without whitespace, padded, and its bytes."""
    clean = _WHITESPACE.sub("", value)
    if not _BASE64.fullmatch(clean) or len(clean.rstrip("=")) % 4 == 1:
        raise InvalidRequest(HarvestMsg.NOT_BASE64, "project_onto")
    clean += "=" * (-len(clean) % 4)
    try:
        return clean, base64.b64decode(clean, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest(HarvestMsg.NOT_BASE64, "project_onto") from None


def directions_of(raw: bytes, dtype: str, shape: tuple[int, int]) -> np.ndarray:
    """Raw little-endian values as float32 `[directions, hidden]`."""
    if dtype == "bfloat16":  # the upper half of a float32
        values = (np.frombuffer(raw, dtype="<u2").astype("<u4") << 16).view("<f4")
    else:
        values = np.frombuffer(raw, dtype="<f4" if dtype == "float32" else "<f2").astype(np.float32)
    return values.reshape(shape)


def _shape(v: object, path: str) -> tuple[int, int]:
    if not isinstance(v, list):
        raise bad_type(path, "a list of two numbers")
    if len(v) != 2:
        raise bad_value(path, "a list of two numbers, [directions, hidden size]")
    return (integer(v[0], f"{path}[0]", ge=1, le=MAX_DIRECTIONS), integer(v[1], f"{path}[1]", ge=1))


def _project_onto(v: object, path: str) -> Projection:
    if not isinstance(v, dict):
        raise bad_type(path, "an object or null")
    reject_unknown(v, {"data", "dtype", "shape", "compression"}, path)
    data = text(required(v, "data", path), f"{path}.data")
    dtype = text(required(v, "dtype", path), f"{path}.dtype")
    if dtype not in DTYPES:
        raise bad_value(f"{path}.dtype", "'float32', 'float16', or 'bfloat16'")
    shape = _shape(required(v, "shape", path), f"{path}.shape")
    if v.get("compression") is not None and text(v["compression"], f"{path}.compression") != "none":
        raise bad_value(f"{path}.compression", "'none'")
    clean, raw = _base64(data)
    needed = shape[0] * shape[1] * DTYPES[dtype]
    if len(raw) != needed:
        raise InvalidRequest(HarvestMsg.DATA_SIZE.format(size=len(raw), k=shape[0], hidden=shape[1], dtype=dtype,
                                                         needed=needed), path)
    directions = directions_of(raw, dtype, shape)
    if not np.isfinite(directions).all():
        raise InvalidRequest(HarvestMsg.NOT_FINITE, path)
    # In float64: a direction of tiny numbers has a length that float32 would round to 0.
    if (np.linalg.norm(directions.astype(np.float64), axis=1) == 0).any():
        raise InvalidRequest(HarvestMsg.ZERO_DIRECTION, path)
    return Projection(clean, dtype, directions)


def decode_projection(stored: dict[str, Any]) -> np.ndarray:
    """The directions of a normalized `project_onto` (HarvestPlan.normalized), float32 `[k, hidden]`."""
    return directions_of(base64.b64decode(stored["data"]), stored["dtype"], tuple(stored["shape"]))


# The body --------------------------------------------------------------------------------

# In the order of the docs' table of fields; the order decides which of several wrong fields is named.
_FIELDS = ("model", "prompts", "layers", "shard_size", "add_special_tokens", "project_onto", "batch_size")


def parse_harvest_request(body: object) -> HarvestRequest:
    """The HarvestRequest of a decoded JSON body, or InvalidRequest."""
    if not isinstance(body, dict):
        raise InvalidRequest(Msg.BODY)
    for key in body:
        if key not in _FIELDS:
            raise InvalidRequest(Msg.UNKNOWN.format(path=key), key)
    for key in ("model", "prompts"):
        if body.get(key) is None:
            raise InvalidRequest(Msg.MISSING.format(path=key), key)

    def given(key: str) -> bool:
        return body.get(key) is not None

    model = text(body["model"], "model")
    prompts, size = _prompts(body["prompts"], "prompts")
    layers = _layers(body["layers"], "layers") if given("layers") else None
    shard_size = (integer(body["shard_size"], "shard_size", ge=1, le=MAX_SHARD_SIZE)
                  if given("shard_size") else DEFAULT_SHARD_SIZE)
    add_special = boolean(body["add_special_tokens"], "add_special_tokens") if given("add_special_tokens") else True
    project_onto = _project_onto(body["project_onto"], "project_onto") if given("project_onto") else None
    batch_size = (integer(body["batch_size"], "batch_size", "a number or null", ge=1, le=MAX_BATCH_SIZE)
                  if given("batch_size") else None)
    return HarvestRequest(model=model, prompts=prompts, layers=layers, shard_size=shard_size,
                          batch_size=batch_size, add_special_tokens=add_special, project_onto=project_onto,
                          utf8_bytes=size)


def quartiles(n_layers: int) -> list[int]:
    """The Layers of a harvest without `layers`: n_layers / 4, / 2 and × 3 / 4."""
    return sorted({n_layers // 4, n_layers // 2, n_layers * 3 // 4})


def fit_to_model(request: HarvestRequest, model: Any) -> HarvestPlan:
    """The Layers the harvest reads on `model`, and its directions checked against the hidden size."""
    n_layers = model.n_layers
    if request.layers is None:
        layers = quartiles(n_layers)
    elif request.layers == "all":
        layers = list(range(n_layers))
    else:
        layers = list(request.layers)
    missing = [layer for layer in layers if layer >= n_layers]
    if missing:
        raise InvalidRequest(HarvestMsg.LAYER.format(model=model.served_model_name, last=n_layers - 1,
                                                     layer=min(missing)), "layers")
    projection = request.project_onto
    if projection is not None and projection.directions.shape[1] != model.hidden_size:
        raise InvalidRequest(HarvestMsg.HIDDEN_SIZE.format(count=projection.directions.shape[1],
                                                           hidden=model.hidden_size), "project_onto")
    return HarvestPlan(request=request, model=model, layers=layers)
