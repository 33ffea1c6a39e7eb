"""A fake engine, at the engine boundary only, for fast tests of the API layer.

It "generates" token ids counting up from 1000 and decodes token t as
" t<t>", so tests can predict every text, offset and logprob.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import AsyncIterator

import numpy as np

from deployments.engine import (
    ChoiceDelta, Engine, EngineOutput, EngineRefused, EngineState, ForwardRequest, GenerateRequest, PromptRows,
    TokenLogprob,
)

FIRST_TOKEN = 1000


def fake_text(token_id: int) -> str:
    return f" t{token_id}"


def fake_row(layer: int, token_id: int, hidden_size: int) -> np.ndarray:
    """The residual stream the fake engine reads for a token at a Layer."""
    return layer + token_id * 1e-3 + np.arange(hidden_size, dtype=np.float32) * 1e-6


def fake_logprob(position: int, rank: int) -> float:
    return -0.5 * rank - 0.01 * position


@dataclass
class FakeEngine(Engine):
    delay_s: float = 0.0           # before each output
    first_delay_s: float = 0.0     # before the first output
    fail_before_first: BaseException | None = None
    fail_after_tokens: int | None = None
    fail_with: BaseException | None = None
    cut_after_tokens: int | None = None   # end the stream silently, unfinished
    eos_after: int | None = None          # finish with "stop" after this many tokens
    n_layers: int = 4
    hidden_size: int = 64
    seen: list[GenerateRequest] = field(default_factory=list)
    aborted: list[str] = field(default_factory=list)
    forwarded: list[ForwardRequest] = field(default_factory=list)
    shut_down: bool = False

    async def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return ([1] if add_special_tokens else []) + [ord(c) for c in text]

    def _position(self, chosen: int, pos: int, k: int | None) -> dict[int, TokenLogprob]:
        top = {FIRST_TOKEN + 500 + r: TokenLogprob(fake_logprob(pos, r), r, fake_text(FIRST_TOKEN + 500 + r))
               for r in range(1, (k or 0) + 1)}
        top[chosen] = TokenLogprob(fake_logprob(pos, 0) - 1.0, k + 1 if k else 1, fake_text(chosen))
        return top

    def _prompt_logprobs(self, request: GenerateRequest) -> list | None:
        k = request.sampling.prompt_logprobs
        if k is None:
            return None
        ids = request.prompt_token_ids
        return [None] + [self._position(t, i, max(k, 0)) for i, t in enumerate(ids[1:], start=1)]

    async def generate(self, request: GenerateRequest) -> AsyncIterator[EngineOutput]:
        self.seen.append(request)
        await asyncio.sleep(self.first_delay_s)
        if self.fail_before_first is not None:
            raise self.fail_before_first
        s = request.sampling
        if s.max_tokens < 1:  # as vLLM's SamplingParams refuse it
            raise EngineRefused(f"max_tokens must be at least 1, got {s.max_tokens}.", "max_tokens")
        limit = s.max_tokens if self.eos_after is None else min(s.max_tokens, self.eos_after)
        for step in range(limit):
            if self.cut_after_tokens is not None and step >= self.cut_after_tokens:
                return
            if self.fail_after_tokens is not None and step >= self.fail_after_tokens:
                raise self.fail_with or RuntimeError("engine failed")
            await asyncio.sleep(self.delay_s)
            last = step == limit - 1
            reason = None if not last else ("stop" if limit < s.max_tokens else "length")
            choices = [self._delta(i, step, s.logprobs, reason) for i in range(s.n)]
            yield EngineOutput(request.request_id, list(request.prompt_token_ids), choices, finished=last,
                               prompt_logprobs=self._prompt_logprobs(request) if step == 0 else None)

    def _delta(self, index: int, step: int, k: int | None, reason: str | None) -> ChoiceDelta:
        token = FIRST_TOKEN + step + 100 * index
        logprobs = None if k is None else [self._position(token, step, k)]
        return ChoiceDelta(index=index, text=fake_text(token), token_ids=[token], logprobs=logprobs,
                           finish_reason=reason, stop_reason=None)

    async def abort(self, request_id: str) -> None:
        self.aborted.append(request_id)

    async def forward(self, request: ForwardRequest) -> list[PromptRows]:
        self.forwarded.append(request)
        if any(layer >= self.n_layers for layer in request.layers):
            raise EngineRefused(f"The model has Layers 0 to {self.n_layers - 1}.", "layers")
        return [PromptRows(list(ids), self._rows(ids, request), "torch.float32") for ids in request.prompts]

    def _rows(self, ids: list[int], request: ForwardRequest) -> np.ndarray:
        rows = np.stack([np.stack([fake_row(layer, t, self.hidden_size) for t in ids]) for layer in request.layers])
        return rows if request.directions is None else rows @ np.asarray(request.directions, np.float32).T

    def state(self) -> EngineState:
        return EngineState(ready=not self.shut_down)

    async def check_health(self) -> None:
        pass

    def shutdown(self) -> None:
        self.shut_down = True
