"""Steering vectors, from the request's JSON to arrays Inference can add.

Every refusal of "Requests that the API refuses" (Steer a Completion) that
needs the model or the prompt is here; the types and nested fields were
checked by `domain.completions.validation`. `position_spans` is the spec's own
field: it is expanded here into one vector per position.

The checks below the API raise neutral errors (`EngineRefused`, the codec's `TensorError`);
`parse_steers` raises them as the API's errors (domain/error_mapping.py), as `plan` does, for
background work that plans where no HTTP handler runs.
"""
from __future__ import annotations

import numpy as np

from domain.errors import InvalidRequest
from domain.error_mapping import api_error_of
from deployments.checks import STEERING_PARAM, ModelInfo, check_layers, check_reach, check_shape
from deployments.engine import EngineRefused, Steer
from deployments.tensor_codec import TensorError, decode

PARAM = STEERING_PARAM
FLOAT32_MAX = float(np.finfo(np.float32).max)
MAX_SPAN_POSITIONS = 4096


def refuse(message: str) -> InvalidRequest:
    return InvalidRequest(message, PARAM)


def _rows(activations: list | dict) -> np.ndarray:
    if isinstance(activations, dict):
        rows = decode(activations, max_bytes=8 * 2**21 * 4)
    else:
        try:
            rows = np.asarray(activations, dtype=np.float64)
        except ValueError as error:
            raise refuse("Rows of activations must all have the same length.") from error
        if np.any(np.abs(rows) > FLOAT32_MAX):
            raise refuse("A number of activations is outside float32's range, from -3.4028235e+38 to 3.4028235e+38.")
        rows = rows.astype(np.float32)
    if rows.ndim not in (2, 3):
        raise refuse("activations has one row for each Layer: a vector, or a list of vectors for each position.")
    if not np.all(np.isfinite(rows)):
        raise refuse("The numbers of activations must be finite.")
    return rows


def _positions(vector: dict, rows: np.ndarray) -> tuple[np.ndarray, list[int] | None]:
    indices, spans = vector["position_indices"], vector["position_spans"]
    if spans is not None:
        if indices is not None:
            raise refuse("position_spans does not go with position_indices.")
        if rows.ndim == 3:
            raise refuse("position_spans takes one vector for each Layer, not a list of vectors.")
        positions = expand_spans(spans)
        return np.repeat(rows[:, None, :], len(positions), axis=1), positions
    if indices is not None and rows.ndim == 2:
        raise refuse("position_indices takes a list of vectors for each Layer, one for each position.")
    if rows.ndim == 2:
        return rows, None
    positions = list(indices) if indices is not None else list(range(rows.shape[1]))
    if len(positions) != rows.shape[1]:
        raise refuse(f"position_indices has {len(positions)} positions for {rows.shape[1]} vectors.")
    return rows, positions


def expand_spans(spans: list[list[int]]) -> list[int]:
    positions: list[int] = []
    for start, end in sorted(spans):
        if end <= start:
            raise refuse(f"The span [{start}, {end}] does not end after it starts.")
        if positions and start < positions[-1] + 1:
            raise refuse("Spans of position_spans may not overlap.")
        positions.extend(range(start, end))
    if len(positions) > MAX_SPAN_POSITIONS:
        raise refuse(f"position_spans covers {len(positions)} positions, more than {MAX_SPAN_POSITIONS}.")
    return positions


def parse_steer(vector: dict, model: ModelInfo, prompt_tokens: int, max_tokens: int) -> Steer:
    layers = vector["layer_indices"]
    if len(set(layers)) != len(layers):
        raise refuse("layer_indices names a Layer twice.")
    rows = _rows(vector["activations"])
    check_shape(rows, layers, model.hidden_size)
    check_layers(layers, model, PARAM)
    rows, positions = _positions(vector, rows)
    check_reach(positions or [], prompt_tokens, max_tokens)
    return Steer(rows, list(layers), float(vector["scale"]), bool(vector["norm_match"]), positions)


def parse_steers(vectors: list[dict], model: ModelInfo, prompt_tokens: int, max_tokens: int) -> list[Steer]:
    try:
        return [parse_steer(vector, model, prompt_tokens, max_tokens) for vector in vectors]
    except (EngineRefused, TensorError) as refusal:
        raise api_error_of(refusal) from refusal
