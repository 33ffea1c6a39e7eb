"""Strict validation of a POST /v1/completions body (docs: Completions, Strict validation).

`parse_completion_request` turns the decoded JSON body into a CompletionRequest,
or raises InvalidRequest with the spec's exact message and `param`. It covers
step 1 of DESIGN.md's order of checks: unknown fields, types, ranges, and the
rules between fields that need no tokenizer. The one-choice rules, size caps,
max_tokens rules and model checks live in `planning.py`.

Rules where the spec is silent (each one is tested in tests/unit/test_validation.py):
- A type message says "or null" when the field's documented default is none
  (`logprobs`, `seed`, `stop`, ...), and not when null stands for a value
  (`max_tokens`, `n`, `echo`, ...), as the spec's two examples do. `null` means
  the default for every field all the same.
- Integer fields take a JSON number with a whole value, so 2.0 is 2: JSON and
  JavaScript clients do not tell 2.0 from 2. 2.5 gets "expected a whole number".
- Every float must be finite (Python's json reads NaN and Infinity).
- Integers that reach the engine unbounded (`seed`, `top_k`, `priority`) are at
  most 2**63 - 1: vLLM's engine transport carries 64-bit integers only.
- Every string is refused with NUL, not only prompt, stop, model and user: a
  Job stores its request in the database, which cannot hold the character.
- Token ids are not range-checked here: Inference refuses an id outside the
  vocabulary (negative ones too) and the API passes its 400 on.
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable, Container, TypeGuard

from domain.completions.request import CompletionRequest
from domain.errors import InvalidRequest

INT64_MAX = 2**63 - 1
GREEDY_TEMPERATURE = 0.00001


class Msg:
    """Every message of Completion validation and planning, in one place.

    Templates copied from the spec are marked (spec); the others follow the
    spec's style where it prints no message.
    """

    UNKNOWN = "Unknown parameter: '{path}'."  # spec
    MISSING = "Missing required parameter: '{path}'."
    TYPE = "Invalid type for '{path}': expected {expected}."  # spec
    VALUE = "Invalid value for '{path}': expected {expected}."  # spec
    BODY = "Invalid type for the request body: expected an object."
    NUL = "A text cannot hold the character U+0000 (NUL)."  # spec (changelog)
    EMPTY_STOP = "stop cannot contain an empty string."  # vLLM's own words
    GREEDY_N = (
        "Set n to 1, or temperature to 0.00001 or more: at a lower temperature, "
        "Inference picks the likeliest token each time."
    )
    STREAM_OPTIONS = "Set stream to true, or leave out stream_options: stream_options is only for streams."
    PROMPT_LOGPROBS_STREAM = (
        "Leave out prompt_logprobs, or stream to false: prompt_logprobs does not work with stream: true."
    )
    # planning.py ------------------------------------------------------------
    ONE_CHOICE_N = "Set n to 1: activations and steering vectors are for one choice only."  # spec
    ONE_CHOICE_PROMPTS = "Send one prompt: activations and steering vectors are for one prompt only."
    EMPTY_PROMPT = "Invalid value for '{path}': expected at least one token."
    CHOICES_CAP = "At most 128 choices in all: n = {n} for each of {prompts} prompts is {total}."
    TOKENS_CAP = (  # spec
        "At most 32000 generated tokens in all: n = {n} times max_tokens = {max_tokens} "
        "for each of {prompts} prompts is {total}."
    )
    STOP_CAP = "At most 4 stop texts: the request has {count}."
    FULL_VOCAB_CAP = (
        "prompt_logprobs: -1 takes at most {limit} prompt tokens in all × n{why}: "
        "{tokens} prompt tokens × n = {n} is {total}."
    )
    TOP_LOGPROBS_CAP = (
        "At most 33554432 top log probabilities of the prompt: {tokens} prompt tokens × n = {n} "
        "× {each} ({parts}) is {total}."
    )
    CAPTURE_CAP = (
        "A capture is at most 33554432 numbers: {layers} × {tokens} tokens "
        "({prompt} of the prompt and max_tokens = {max_tokens}) × hidden size {hidden} is {total}. "
        "Read fewer Layers, or set a smaller max_tokens."
    )
    VECTORS_CAP = "At most 8 Steering vectors: the request has {count}."
    NUMBERS_CAP = "At most 2097152 numbers in all Steering vectors: the request has {count}."
    MAX_TOKENS_REQUIRED = "Set max_tokens: a request with more than one prompt, or with n above 1, must set it."
    DEADLINE = (
        "Without stream, max_tokens is at most 15600: Inference cannot write {max_tokens} tokens "
        "within the API's 14-minute wait. Set stream to true, or max_tokens to 15600 or less."
    )
    CONTEXT = (  # spec (vLLM's words)
        "This model's maximum context length is {max_model_len} tokens. However, you requested "
        "{max_tokens} output tokens and your prompt contains {prompt} input tokens, for a total of "
        "{total} tokens. Please reduce the length of the input prompt or the number of requested "
        "output tokens. (parameter=input_tokens, value={prompt})"
    )


# Helpers ---------------------------------------------------------------------

def _param(path: str) -> str:
    """The top-level field of a nested path such as 'apply_steering_vectors[0].scale'."""
    return re.split(r"[.\[]", path, maxsplit=1)[0]


def bad_type(path: str, expected: str) -> InvalidRequest:
    return InvalidRequest(Msg.TYPE.format(path=path, expected=expected), _param(path))


def bad_value(path: str, expected: str) -> InvalidRequest:
    return InvalidRequest(Msg.VALUE.format(path=path, expected=expected), _param(path))


def _fmt(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def _in_range(x: float, path: str, *, ge=None, le=None, gt=None) -> Any:
    # Written as `not (x >= ge)` so that nothing slips through a comparison.
    if ge is not None and not x >= ge:
        raise bad_value(path, f"a value greater than or equal to {_fmt(ge)}")
    if gt is not None and not x > gt:
        raise bad_value(path, f"a value greater than {_fmt(gt)}")
    if le is not None and not x <= le:
        raise bad_value(path, f"a value less than or equal to {_fmt(le)}")
    return x


def _is_number(v: object) -> TypeGuard[int | float]:
    # bool is a subclass of int in Python, but `true` is not a number in JSON.
    return type(v) is int or type(v) is float


def integer(v: object, path: str, expected: str = "a number", **bounds: float) -> int:
    if not _is_number(v):
        raise bad_type(path, expected)
    if type(v) is float:
        if not (math.isfinite(v) and v.is_integer()):
            raise bad_value(path, "a whole number")
        v = int(v)
    return _in_range(v, path, **bounds)


def number(v: object, path: str, expected: str = "a number", **bounds: float) -> float:
    if not _is_number(v):
        raise bad_type(path, expected)
    try:
        x = float(v)
    except OverflowError:  # an integer beyond float's range
        x = math.inf
    if not math.isfinite(x):
        raise bad_value(path, "a finite number")
    return _in_range(x, path, **bounds)


def boolean(v: object, path: str, expected: str = "a boolean") -> bool:
    if type(v) is not bool:
        raise bad_type(path, expected)
    return v


def text(v: object, path: str, expected: str = "a string") -> str:
    if not isinstance(v, str):
        raise bad_type(path, expected)
    if "\x00" in v:
        raise InvalidRequest(Msg.NUL, _param(path))
    return v


def reject_unknown(obj: dict, known: Container[str], path: str) -> None:
    for key in obj:
        if key not in known:
            raise InvalidRequest(Msg.UNKNOWN.format(path=f"{path}.{key}"), _param(path))


def reject_unknown_fields(body: dict, known: Container[str]) -> None:
    """A top-level field that the route does not know: 400, `param` the field."""
    for key in body:
        if key not in known:
            raise InvalidRequest(Msg.UNKNOWN.format(path=key), key)


def required(obj: dict, key: str, path: str) -> object:
    if obj.get(key) is None:
        raise InvalidRequest(Msg.MISSING.format(path=f"{path}.{key}"), _param(path))
    return obj[key]


def non_empty_list(v: object, path: str, expected: str) -> list:
    if not isinstance(v, list):
        raise bad_type(path, expected)
    if not v:
        raise bad_value(path, "a non-empty list")
    return v


def int_list(v: object, path: str, expected: str = "a list of numbers", ge: int | None = None) -> list[int]:
    if not isinstance(v, list):
        raise bad_type(path, expected)
    # Fast path: a list of token ids can hold a million ids.
    if all(type(x) is int for x in v) and (ge is None or not v or min(v) >= ge):
        return v
    if ge is None:
        return [integer(x, f"{path}[{i}]") for i, x in enumerate(v)]
    return [integer(x, f"{path}[{i}]", ge=ge) for i, x in enumerate(v)]


def numbers(v: object, path: str) -> list:
    """A list of JSON numbers, kept as sent (a vector of up to 2**21 numbers)."""
    if not isinstance(v, list):
        raise bad_type(path, "a list of numbers")
    if not all(type(x) is float or type(x) is int for x in v):
        bad = next(i for i, x in enumerate(v) if not _is_number(x))
        raise bad_type(f"{path}[{bad}]", "a number")
    return v


# Fields with their own shape ---------------------------------------------------

PROMPT_TYPE = "a string, a list of token ids, a list of strings, or a list of token-id lists"


def _prompt(v: object, path: str) -> list:
    if isinstance(v, str):
        return [text(v, path)]
    items = non_empty_list(v, path, PROMPT_TYPE)
    first = items[0]
    if _is_number(first):
        return [int_list(items, path)]
    if isinstance(first, str):
        return [text(x, f"{path}[{i}]") for i, x in enumerate(items)]
    if isinstance(first, list):
        return [int_list(x, f"{path}[{i}]", "a list of token ids") for i, x in enumerate(items)]
    raise bad_type(path, PROMPT_TYPE)


def _stop(v: object, path: str) -> list[str]:
    stops = [v] if isinstance(v, str) else v
    if not isinstance(stops, list):
        raise bad_type(path, "a string, a list of strings, or null")
    stops = [text(s, path if s is v else f"{path}[{i}]") for i, s in enumerate(stops)]
    if any(s == "" for s in stops):
        raise InvalidRequest(Msg.EMPTY_STOP, "stop")
    return stops


_DIGITS = re.compile(r"[0-9]{1,9}")


def _priority(v: object, path: str) -> int:
    # The spec: null is 0, a text of digits and true/false count as their number.
    if type(v) is bool:
        return int(v)
    if isinstance(v, str):
        if not _DIGITS.fullmatch(v):
            raise bad_type(path, "a number, a string of digits, a boolean, or null")
        return int(v)
    return integer(v, path, "a number, a string of digits, a boolean, or null", ge=0, le=INT64_MAX)


def _stream_options(v: object, path: str) -> dict[str, bool]:
    if not isinstance(v, dict):
        raise bad_type(path, "an object or null")
    keys = ("include_usage", "continuous_usage_stats")
    reject_unknown(v, set(keys), path)
    return {k: boolean(v[k], f"{path}.{k}") for k in keys if v.get(k) is not None}


def _residual_stream(v: object, path: str):
    # true reads every Layer; false reads none (vllm-lens would read all: DESIGN).
    if type(v) is bool:
        return True if v else None
    layers = non_empty_list(v, path, "a list of numbers, a boolean, or null")
    # The API sorts the Layers and reads a repeated one once (docs: Read Activations).
    return sorted(set(int_list(layers, path, ge=0)))


def _optional(obj: dict, key: str, parse: Callable, path: str, default: object = None, **kw: Any) -> object:
    return default if obj.get(key) is None else parse(obj[key], f"{path}.{key}", **kw)


# Steering vectors: types and unknown keys only (openapi SteeringVector and
# SteeringTensor). Rows against layer_indices, hidden size, float32 range,
# positions and the decoding of a tensor are checked where they are decoded.
_VECTOR_KEYS = {"activations", "layer_indices", "scale", "norm_match", "position_indices", "position_spans"}
_TENSOR_KEYS = ("data", "dtype", "original_dtype", "shape", "compression")
ACTIVATIONS_TYPE = "a list of rows of numbers, or an encoded tensor"


def _steering_vectors(v: object, path: str) -> list[dict]:
    vectors = non_empty_list(v, path, "a list of objects or null")
    return [_steering_vector(x, f"{path}[{i}]") for i, x in enumerate(vectors)]


def _steering_vector(v: object, path: str) -> dict:
    """The vector with every key, null replaced by its default."""
    if not isinstance(v, dict):
        raise bad_type(path, "an object")
    reject_unknown(v, _VECTOR_KEYS, path)
    return {
        "activations": _activations(required(v, "activations", path), f"{path}.activations"),
        "layer_indices": int_list(required(v, "layer_indices", path), f"{path}.layer_indices", ge=0),
        "scale": _optional(v, "scale", number, path, 1.0),
        "norm_match": _optional(v, "norm_match", boolean, path, False),
        "position_indices": _optional(v, "position_indices", int_list, path, None, ge=0),
        "position_spans": _optional(v, "position_spans", _spans, path, None),
    }


def _activations(v: object, path: str) -> list | dict:
    if isinstance(v, dict):
        return _tensor(v, path)
    if not isinstance(v, list):
        raise bad_type(path, ACTIVATIONS_TYPE)
    # A row is one vector, or a list of vectors (one per position); the first
    # non-empty row decides which, and every row must then be alike.
    first = next((row for row in v if isinstance(row, list) and row), [0])
    per_position = isinstance(first[0], list)
    for i, row in enumerate(v):
        if not per_position:
            numbers(row, f"{path}[{i}]")
            continue
        if not isinstance(row, list):
            raise bad_type(f"{path}[{i}]", "a list of lists of numbers")
        for j, vector in enumerate(row):
            numbers(vector, f"{path}[{i}][{j}]")
    return v


def _tensor(v: dict, path: str) -> dict:
    reject_unknown(v, set(_TENSOR_KEYS), path)
    out: dict[str, Any] = {}
    for key in _TENSOR_KEYS:
        value, key_path = required(v, key, path), f"{path}.{key}"
        out[key] = int_list(value, key_path, ge=0) if key == "shape" else text(value, key_path)
    if out["compression"] != "zstd":
        raise bad_value(f"{path}.compression", "'zstd'")
    return out


def _spans(v: object, path: str) -> list[list[int]]:
    spans = non_empty_list(v, path, "a list of [start, end] pairs or null")
    for i, span in enumerate(spans):
        if not (isinstance(span, list) and len(span) == 2):
            raise bad_type(f"{path}[{i}]", "a list of two numbers")
    return [int_list(span, f"{path}[{i}]", ge=0) for i, span in enumerate(spans)]


# The body ----------------------------------------------------------------------

def _field(parse: Callable, **kw: Any) -> Callable[[object, str], object]:
    return lambda v, path: parse(v, path, **kw)


# In the order of OpenAI's docs, vLLM's and vllm-lens's fields after; the
# parse order decides which of several wrong fields the message names.
_FIELDS: dict[str, Callable[[object, str], object]] = {
    "model": text,
    "prompt": _prompt,
    "max_tokens": _field(integer, ge=0),  # the 32000 cap is a size cap (planning)
    "n": _field(integer, ge=1),  # the 128 cap is a size cap (planning)
    "stop": _stop,
    "echo": boolean,
    "add_special_tokens": boolean,
    "temperature": _field(number, ge=0, le=2),
    "top_p": _field(number, gt=0, le=1),
    "top_k": _field(integer, ge=-1, le=INT64_MAX),
    "min_p": _field(number, ge=0, le=1),
    "presence_penalty": _field(number, ge=-2, le=2),
    "frequency_penalty": _field(number, ge=-2, le=2),
    "repetition_penalty": _field(number, gt=0),
    "seed": _field(integer, expected="a number or null", ge=0, le=INT64_MAX),
    "logprobs": _field(integer, expected="a number or null", ge=0, le=100),
    "prompt_logprobs": _field(integer, expected="a number or null", ge=-1, le=100),
    "stream": boolean,
    "stream_options": _stream_options,
    "priority": _priority,
    "user": _field(text, expected="a string or null"),
    "output_residual_stream": _residual_stream,
    "apply_steering_vectors": _steering_vectors,
}


def parse_completion_request(body: object) -> CompletionRequest:
    """The CompletionRequest of a decoded JSON body, or InvalidRequest."""
    if not isinstance(body, dict):
        raise InvalidRequest(Msg.BODY)
    reject_unknown_fields(body, _FIELDS)  # extra_body, best_of, suffix, logit_bias, typos
    if body.get("prompt") is None:
        raise InvalidRequest(Msg.MISSING.format(path="prompt"), "prompt")
    # A null field gets its default, for every field (DESIGN.md).
    values = {key: parse(body[key], key) for key, parse in _FIELDS.items() if body.get(key) is not None}
    request = _build(dict(values))
    _check_together(request, sent_stream_options="stream_options" in values)
    return request


def _build(values: dict[str, Any]) -> CompletionRequest:
    options = values.pop("stream_options", {})
    return CompletionRequest(
        prompts=values.pop("prompt"),
        include_usage=options.get("include_usage", False),
        continuous_usage_stats=options.get("continuous_usage_stats", False),
        **values,
    )


def _check_together(req: CompletionRequest, *, sent_stream_options: bool) -> None:
    """The rules between fields (docs: Strict validation)."""
    if req.n > 1 and req.temperature < GREEDY_TEMPERATURE:
        raise InvalidRequest(Msg.GREEDY_N, "n")
    if sent_stream_options and not req.stream:
        raise InvalidRequest(Msg.STREAM_OPTIONS, "stream_options")
    if req.prompt_logprobs is not None and req.stream:
        raise InvalidRequest(Msg.PROMPT_LOGPROBS_STREAM, "prompt_logprobs")
