"""From a validated CompletionRequest to a PlannedRequest (docs: Completions).

`plan` applies steps 2 to 5 of DESIGN.md's order of checks: the one-choice
rules of Activations and Steering vectors, the size caps, the max_tokens rules,
then the checks against the model's facts. The caller resolves the model
(model_not_found) before, and takes the Hold after: `hold_tokens` counts it.
Each refusal is an ApiError, the checks' neutral `EngineRefused` answered by the one
error mapping: background work (a Job, a Loom Node) plans again when it runs, and
records the refusal as its answer where no HTTP handler runs.

Prompt tokens are counted as the Hold counts them: a text with the model's own
tokenizer (BOS included when add_special_tokens is on), a list of ids one token
for each id.
"""
from __future__ import annotations

import math
from typing import Callable

from domain.completions.request import CompletionRequest, PlannedRequest
from domain.completions.validation import Msg
from domain.errors import ContextLengthExceeded, DeadlineInfeasible, InvalidRequest
from domain.error_mapping import api_error_of
from deployments.checks import ModelInfo, check_layers
from deployments.engine import EngineRefused

MAX_CHOICES = 128
MAX_GENERATED = 32000
MAX_WITHOUT_STREAM = 15600  # 20 tokens a second for 13 minutes
MAX_STOP_TEXTS = 4
FULL_VOCAB_TOKENS, FULL_VOCAB_TOKENS_WITH_CAPTURE = 256, 16
MAX_TOP_LOGPROBS = 2**25
MAX_CAPTURE_NUMBERS = 2**25
MAX_STEERING_VECTORS = 8
MAX_STEERING_NUMBERS = 2**21
# openapi: a model without a hidden size in the catalogue counts as the largest.
UNKNOWN_HIDDEN_SIZE = 16384

CountTokens = Callable[[str, bool], list[int]]


def plan(req: CompletionRequest, *, model: ModelInfo, count_tokens: CountTokens) -> PlannedRequest:
    _check_one_choice(req)
    token_ids = [_prompt_tokens(p, req.add_special_tokens, count_tokens) for p in req.prompts]
    _check_not_empty(token_ids)
    default, clamped = _default_max_tokens(token_ids, model, req.stream)
    max_tokens = default if req.max_tokens is None else req.max_tokens
    _check_caps(req, token_ids, model, max_tokens)
    _check_max_tokens(req, token_ids, model, max_tokens)
    _check_layers(req, model)
    return PlannedRequest(
        request=req,
        prompt_token_ids=token_ids,
        max_tokens=max_tokens,
        max_tokens_source="default" if req.max_tokens is None else "client",
        deadline_clamped=clamped and req.max_tokens is None,
    )


def hold_tokens(planned: PlannedRequest) -> int:
    """The Hold: for each prompt, its tokens and n × max_tokens (at least 1).

    With echo and max_tokens 0, Inference still generates and counts 1 token
    for each choice (docs: The Hold).
    """
    per_prompt = planned.request.n * max(planned.max_tokens, 1)
    return sum(len(ids) + per_prompt for ids in planned.prompt_token_ids)


# Step 2: one prompt, one choice --------------------------------------------------

def _check_one_choice(req: CompletionRequest) -> None:
    if req.output_residual_stream is None and req.apply_steering_vectors is None:
        return
    # With both fields, the errors for n and for prompts name the capture.
    param = "output_residual_stream" if req.output_residual_stream is not None else "apply_steering_vectors"
    if req.n != 1:
        raise InvalidRequest(Msg.ONE_CHOICE_N, param)
    if len(req.prompts) != 1:
        raise InvalidRequest(Msg.ONE_CHOICE_PROMPTS, param)


def _prompt_tokens(prompt: str | list[int], add_special_tokens: bool, count_tokens: CountTokens) -> list[int]:
    # Inference adds no special tokens to token ids (docs: Request fields).
    return count_tokens(prompt, add_special_tokens) if isinstance(prompt, str) else prompt


def _check_not_empty(token_ids: list[list[int]]) -> None:
    # vLLM refuses an empty prompt; say which one before it holds anything.
    for i, ids in enumerate(token_ids):
        if not ids:
            path = "prompt" if len(token_ids) == 1 else f"prompt[{i}]"
            raise InvalidRequest(Msg.EMPTY_PROMPT.format(path=path), "prompt")


# Step 3: size caps ---------------------------------------------------------------

def _check_caps(req: CompletionRequest, token_ids: list[list[int]], model: ModelInfo, max_tokens: int) -> None:
    prompts, n = len(req.prompts), req.n
    if prompts * n > MAX_CHOICES:
        raise InvalidRequest(Msg.CHOICES_CAP.format(n=n, prompts=prompts, total=prompts * n), "n")
    # Left out, max_tokens is one prompt's room, which never passes the cap.
    if req.max_tokens is not None and prompts * n * max(max_tokens, 1) > MAX_GENERATED:
        total = prompts * n * max(max_tokens, 1)
        raise InvalidRequest(
            Msg.TOKENS_CAP.format(n=n, max_tokens=max_tokens, prompts=prompts, total=total), "max_tokens"
        )
    if len(req.stop) > MAX_STOP_TEXTS:
        raise InvalidRequest(Msg.STOP_CAP.format(count=len(req.stop)), "stop")
    _check_full_vocab(req, token_ids)
    _check_top_logprobs(req, token_ids, model)
    _check_capture(req, token_ids, model, max_tokens)
    _check_steering_size(req)


def _check_full_vocab(req: CompletionRequest, token_ids: list[list[int]]) -> None:
    if req.prompt_logprobs != -1:
        return
    capture = req.output_residual_stream is not None
    limit = FULL_VOCAB_TOKENS_WITH_CAPTURE if capture else FULL_VOCAB_TOKENS
    tokens = sum(map(len, token_ids))
    if tokens * req.n > limit:
        why = " with output_residual_stream" if capture else ""
        message = Msg.FULL_VOCAB_CAP.format(limit=limit, why=why, tokens=tokens, n=req.n, total=tokens * req.n)
        raise InvalidRequest(message, "prompt_logprobs")


def _check_top_logprobs(req: CompletionRequest, token_ids: list[list[int]], model: ModelInfo) -> None:
    """Each prompt token × n has k + 1 for prompt_logprobs k, and k + 1 more
    for logprobs k with echo. -1 counts the whole vocabulary."""
    parts: list[tuple[int, str]] = []
    if req.prompt_logprobs == -1 and model.vocab_size:
        parts.append((model.vocab_size, "prompt_logprobs = -1, the whole vocabulary"))
    elif req.prompt_logprobs is not None and req.prompt_logprobs >= 0:
        parts.append((req.prompt_logprobs + 1, f"prompt_logprobs = {req.prompt_logprobs} + 1"))
    if req.echo and req.logprobs is not None:
        parts.append((req.logprobs + 1, f"logprobs = {req.logprobs} + 1 with echo"))
    tokens, each = sum(map(len, token_ids)), sum(count for count, _ in parts)
    total = tokens * req.n * each
    if total > MAX_TOP_LOGPROBS:
        described = ", ".join(what for _, what in parts)
        message = Msg.TOP_LOGPROBS_CAP.format(tokens=tokens, n=req.n, each=each, parts=described, total=total)
        raise InvalidRequest(message, "prompt_logprobs" if req.prompt_logprobs is not None else "logprobs")


def _check_capture(req: CompletionRequest, token_ids: list[list[int]], model: ModelInfo, max_tokens: int) -> None:
    """Layers × (prompt tokens + max_tokens) × hidden size, for the one prompt."""
    layers = req.output_residual_stream
    if layers is None:
        return
    count = len(layers) if isinstance(layers, list) else model.n_layers
    if count is None:  # every Layer of a model whose Layers we do not know
        return
    hidden = model.hidden_size or UNKNOWN_HIDDEN_SIZE
    prompt = len(token_ids[0])
    total = count * (prompt + max_tokens) * hidden
    if total > MAX_CAPTURE_NUMBERS:
        message = Msg.CAPTURE_CAP.format(
            layers=f"{count} Layer" if count == 1 else f"{count} Layers", tokens=prompt + max_tokens, prompt=prompt, max_tokens=max_tokens, hidden=hidden, total=total
        )
        raise InvalidRequest(message, "output_residual_stream")


def _check_steering_size(req: CompletionRequest) -> None:
    vectors = req.apply_steering_vectors
    if vectors is None:
        return
    if len(vectors) > MAX_STEERING_VECTORS:
        raise InvalidRequest(Msg.VECTORS_CAP.format(count=len(vectors)), "apply_steering_vectors")
    total = sum(map(steering_numbers, vectors))
    if total > MAX_STEERING_NUMBERS:
        raise InvalidRequest(Msg.NUMBERS_CAP.format(count=total), "apply_steering_vectors")


def steering_numbers(vector: dict) -> int:
    """The numbers that one vector sends to Inference.

    A vector with position_spans counts once for each position of its spans
    (the API expands the spans into positions).
    """
    activations = vector["activations"]
    if isinstance(activations, dict):  # an encoded tensor: its shape says
        count = math.prod(activations["shape"])
    else:
        count = sum(_row_numbers(row) for row in activations)
    spans = vector.get("position_spans")
    if spans:
        count *= sum(max(end - start, 0) for start, end in spans)
    return count


def _row_numbers(row: list) -> int:
    if row and isinstance(row[0], list):  # one vector for each position
        return sum(map(len, row))
    return len(row)


# Step 4: max_tokens --------------------------------------------------------------

def _default_max_tokens(token_ids: list[list[int]], model: ModelInfo, stream: bool) -> tuple[int, bool]:
    """The room left after the (one) prompt: at least 1, at most 32000, and at
    most 15600 without stream. The flag says the 15600 limit lowered it."""
    room = min(max(model.max_model_len - len(token_ids[0]), 1), MAX_GENERATED)
    if not stream and room > MAX_WITHOUT_STREAM:
        return MAX_WITHOUT_STREAM, True
    return room, False


def _check_max_tokens(req: CompletionRequest, token_ids: list[list[int]], model: ModelInfo, max_tokens: int) -> None:
    if req.max_tokens is None and (len(req.prompts) > 1 or req.n > 1):
        raise InvalidRequest(Msg.MAX_TOKENS_REQUIRED, "max_tokens")
    if req.max_tokens is not None and not req.stream and req.max_tokens > MAX_WITHOUT_STREAM:
        raise DeadlineInfeasible(Msg.DEADLINE.format(max_tokens=req.max_tokens), "max_tokens")
    # Inference generates at least one token, also for max_tokens 0 with echo.
    output = max(max_tokens, 1)
    for ids in token_ids:
        if len(ids) + output > model.max_model_len:
            message = Msg.CONTEXT.format(
                max_model_len=model.max_model_len, max_tokens=output, prompt=len(ids), total=len(ids) + output
            )
            raise ContextLengthExceeded(message, "prompt")


# Step 5: the model's facts ---------------------------------------------------------

def _check_layers(req: CompletionRequest, model: ModelInfo) -> None:
    if isinstance(req.output_residual_stream, list):
        try:
            check_layers(req.output_residual_stream, model, "output_residual_stream")
        except EngineRefused as refusal:
            raise api_error_of(refusal) from None
