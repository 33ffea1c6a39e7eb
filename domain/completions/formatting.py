"""Engine outputs -> the OpenAI Completion and chunk shapes.

Mirrors vLLM's own OpenAI server (echo, text_offset, k or k+1 top
logprobs, -9999 for -inf) so code written for vLLM reads our answers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from deployments.engine import ChoiceDelta, PositionLogprobs, TokenLogprob

Decode = Callable[[int], str]
LOGPROB_FLOOR = -9999.0


def clamp(value: float) -> float:
    return LOGPROB_FLOOR if math.isinf(value) or math.isnan(value) else max(value, LOGPROB_FLOOR)


def keep_top(position: PositionLogprobs | None, k: int | None, token_id: int) -> PositionLogprobs | None:
    """The token itself and the k likeliest (all for k == -1 or None)."""
    if position is None or k is None or k < 0:
        return position
    return {t: lp for t, lp in position.items() if t == token_id or (lp.rank is not None and lp.rank <= k)}


def prompt_logprobs_json(
    token_ids: list[int], positions: list[PositionLogprobs | None], k: int
) -> list[dict[str, Any] | None]:
    out: list[dict[str, Any] | None] = []
    for token_id, position in zip(token_ids, positions):
        kept = keep_top(position, k, token_id)
        out.append(None if kept is None else {
            str(t): {"logprob": clamp(lp.logprob), "rank": lp.rank, "decoded_token": lp.decoded_token}
            for t, lp in kept.items()
        })
    return out


def _token_text(token_id: int, lp: TokenLogprob | None, decode: Decode) -> str:
    if lp is not None and lp.decoded_token is not None:
        return lp.decoded_token
    return decode(token_id)


def logprobs_json(
    token_ids: list[int], positions: list[PositionLogprobs | None], k: int,
    decode: Decode, initial_offset: int = 0,
) -> dict[str, Any]:
    tokens, token_logprobs, top, offsets = [], [], [], []
    offset = initial_offset
    for token_id, position in zip(token_ids, positions):
        position = keep_top(position, k, token_id)
        chosen = position.get(token_id) if position else None
        text = _token_text(token_id, chosen, decode)
        tokens.append(text)
        offsets.append(offset)
        offset += len(text)
        if position is None:
            token_logprobs.append(None)
            top.append(None)
            continue
        token_logprobs.append(clamp(chosen.logprob) if chosen else None)
        top.append({_token_text(t, lp, decode): clamp(lp.logprob) for t, lp in position.items()})
    return {"text_offset": offsets, "token_logprobs": token_logprobs, "tokens": tokens, "top_logprobs": top}


@dataclass
class ChoiceState:
    """Everything one choice wrote so far."""

    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[PositionLogprobs | None] = field(default_factory=list)
    finish_reason: str | None = None
    stop_reason: str | int | None = None
    echoed: bool = False
    # Characters of logprob tokens already streamed: the next text_offset.
    streamed_offset: int = 0

    def add(self, delta: ChoiceDelta) -> None:
        self.text += delta.text
        self.token_ids.extend(delta.token_ids)
        if delta.logprobs is not None:
            self.logprobs.extend(delta.logprobs)
        if delta.finish_reason is not None:
            self.finish_reason, self.stop_reason = delta.finish_reason, delta.stop_reason

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None
