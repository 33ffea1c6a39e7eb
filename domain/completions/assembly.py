"""Assemble one Completion from the engine outputs of its prompts.

Each prompt is one engine request; choice `i` of prompt `p` answers as
index p * n + i. The same state feeds stream chunks and the final answer.
"""
from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from domain import errors
from domain.completions.formatting import ChoiceState, Decode, logprobs_json, prompt_logprobs_json
from domain.completions.request import PlannedRequest
from deployments.engine import EngineOutput, PositionLogprobs


def new_completion_id() -> str:
    return f"cmpl-{secrets.token_hex(8)}"


def engine_prompt_logprobs(planned: PlannedRequest) -> int | None:
    """Echo with logprobs needs the prompt's logprobs too; -1 covers everything."""
    r = planned.request
    wanted = [k for k in (r.prompt_logprobs, r.logprobs if r.echo else None) if k is not None]
    if not wanted:
        return None
    return -1 if -1 in wanted else max(wanted)


def generates_nothing(planned: PlannedRequest) -> bool:
    """max_tokens 0 counts as 1 (the spec's Size caps and Hold): Inference writes (and counts) 1
    token that the text and the logprobs leave out, with echo (the scoring idiom) or without."""
    return planned.max_tokens == 0


@dataclass
class PromptState:
    text: str | None
    token_ids: list[int]
    choices: dict[int, ChoiceState] = field(default_factory=dict)
    prompt_logprobs: list[PositionLogprobs | None] | None = None
    finished: bool = False
    activations: dict | None = None


class CompletionAssembly:
    def __init__(self, planned: PlannedRequest, model_name: str, decode: Decode) -> None:
        self.planned, self.model_name, self.decode = planned, model_name, decode
        self.id, self.created = new_completion_id(), int(time.time())
        req = planned.request
        self.prompts = [
            PromptState(text=p if isinstance(p, str) else None, token_ids=ids)
            for p, ids in zip(req.prompts, planned.prompt_token_ids)
        ]

    # -- feeding --------------------------------------------------------------
    def add(self, p: int, output: EngineOutput) -> list[dict[str, Any]]:
        """Record one engine output; return the stream chunk choices it makes."""
        prompt = self.prompts[p]
        if output.prompt_logprobs is not None:
            prompt.prompt_logprobs = output.prompt_logprobs
        if output.activations is not None:
            prompt.activations = output.activations
        chunks = []
        for delta in output.choices:
            state = prompt.choices.setdefault(delta.index, ChoiceState())
            before_tokens = len(state.token_ids)
            state.add(delta)
            chunks.append(self._chunk_choice(p, delta.index, state, before_tokens, delta.text))
        prompt.finished = prompt.finished or output.finished
        return chunks

    def complete(self) -> bool:
        n = self.planned.request.n
        return all(
            p.finished and len(p.choices) == n and all(c.finished for c in p.choices.values())
            for p in self.prompts
        )

    # -- the pieces of a choice ----------------------------------------------
    def _prompt_text(self, prompt: PromptState) -> str:
        return prompt.text if prompt.text is not None else self.decode_ids(prompt.token_ids)

    def decode_ids(self, ids: list[int]) -> str:
        return "".join(self.decode(t) for t in ids)

    def _logprobs(self, prompt: PromptState, state: ChoiceState, start: int, with_prompt: bool,
                  initial_offset: int = 0) -> Any:
        k = self.planned.request.logprobs
        if k is None:
            return None
        ids, positions = [], []
        if with_prompt:
            ids += prompt.token_ids
            positions += prompt.prompt_logprobs or [None] * len(prompt.token_ids)
        if not generates_nothing(self.planned):
            ids += state.token_ids[start:]
            positions += state.logprobs[start:]
        return logprobs_json(ids, positions, k, self.decode, initial_offset)

    def _text(self, prompt: PromptState, generated: str, with_prompt: bool) -> str:
        head = self._prompt_text(prompt) if with_prompt else ""
        return head + ("" if generates_nothing(self.planned) else generated)

    def _chunk_choice(self, p: int, i: int, state: ChoiceState, start: int, delta_text: str) -> dict[str, Any]:
        prompt = self.prompts[p]
        with_prompt = self.planned.request.echo and not state.echoed
        state.echoed = state.echoed or with_prompt
        # As vLLM streams them: offsets count on from the choice's earlier chunks.
        logprobs = self._logprobs(prompt, state, start, with_prompt, state.streamed_offset)
        if logprobs is not None:
            state.streamed_offset += sum(len(token) for token in logprobs["tokens"])
        return {
            "index": p * self.planned.request.n + i,
            "text": self._text(prompt, delta_text, with_prompt),
            "logprobs": logprobs,
            "finish_reason": state.finish_reason,
            "stop_reason": state.stop_reason,
            "_usage": self._choice_usage(prompt, state),
        }

    def _choice_usage(self, prompt: PromptState, state: ChoiceState) -> dict[str, int]:
        done = len(state.token_ids)
        return {"prompt_tokens": len(prompt.token_ids), "completion_tokens": done,
                "total_tokens": len(prompt.token_ids) + done}

    # -- the whole answer -------------------------------------------------------
    def usage(self) -> dict[str, int]:
        prompt_tokens = sum(len(p.token_ids) for p in self.prompts)
        completion_tokens = self.completion_tokens()
        return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens}

    def completion_tokens(self) -> int:
        return sum(len(c.token_ids) for p in self.prompts for c in p.choices.values())

    def _final_choice(self, p: int, i: int) -> dict[str, Any]:
        prompt, state = self.prompts[p], self.prompts[p].choices[i]
        req = self.planned.request
        prompt_logprobs = None
        if req.prompt_logprobs is not None and prompt.prompt_logprobs is not None:
            prompt_logprobs = prompt_logprobs_json(prompt.token_ids, prompt.prompt_logprobs, req.prompt_logprobs)
        return {
            "index": p * req.n + i,
            "text": self._text(prompt, state.text, req.echo),
            "logprobs": self._logprobs(prompt, state, 0, req.echo),
            "finish_reason": state.finish_reason,
            "stop_reason": state.stop_reason,
            "prompt_logprobs": prompt_logprobs,
        }

    def check_activations(self) -> dict[str, Any] | None:
        """The Activations, once their shape fits the request; 502 when it does not."""
        capture = self.planned.capture
        if capture is None:
            return None
        prompt = self.prompts[0]  # a capture is for one prompt and one choice
        tensor = (prompt.activations or {}).get("residual_stream")
        if tensor is None:
            raise errors.UpstreamServerError(errors.ANSWER_MISFIT_PREFIX + "its activations are missing.")
        rows = len(prompt.token_ids) + self.completion_tokens() - 1
        expected = [len(capture.layers), rows, capture.hidden_size]
        if list(tensor["shape"]) != expected:
            raise errors.UpstreamServerError(
                errors.ANSWER_MISFIT_PREFIX + f"its activations have the shape {tensor['shape']}, not {expected}.")
        return {"residual_stream": tensor}

    def completion(self) -> dict[str, Any]:
        choices = [
            self._final_choice(p, i)
            for p, prompt in enumerate(self.prompts) for i in sorted(prompt.choices)
        ]
        body = {"id": self.id, "object": "text_completion", "created": self.created,
                "model": self.model_name, "choices": choices, "usage": self.usage()}
        # The caller checked the shape before it settled the Hold.
        tensor = (self.prompts[0].activations or {}).get("residual_stream")
        if self.planned.capture is not None and tensor is not None:
            body["activations"] = {"residual_stream": tensor}
        return body

    def chunk(self, choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"id": self.id, "object": "text_completion", "created": self.created,
                                "model": self.model_name, "choices": choices}
        if usage is not None:
            body["usage"] = usage
        return body
