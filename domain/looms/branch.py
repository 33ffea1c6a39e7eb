"""A Branch's request: its fields checked as Completions checks them, and each
Node's own request in the spec's NodeRequest shape (spec: "Branch under a Node").

The fields take the types and defaults of POST /v1/completions, except
`max_tokens` (1 to 1,000, default 16) and `n` (1 to 8, the number of Nodes).
Node i samples with `seed + i`; without a seed the API draws one.
"""
from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from domain import errors
from domain.completions.validation import Msg, integer, parse_completion_request, reject_unknown_fields

MAX_NODE_TOKENS = 1000
MAX_NODES_PER_BRANCH = 8
DEFAULT_MAX_TOKENS = 16
SEED_DRAWN_BELOW = 2**31  # a drawn seed is 0 to 2,147,483,647
LARGEST_SEED = 2**53 - 1  # 9,007,199,254,740,991: what JSON and JavaScript hold exactly

# The NodeRequest's fields, in the spec's order, with the defaults a Node shows.
SAMPLING_DEFAULTS: dict[str, Any] = {
    "max_tokens": DEFAULT_MAX_TOKENS, "temperature": 1, "logprobs": None, "top_p": 1, "top_k": 0, "min_p": 0,
    "presence_penalty": 0, "frequency_penalty": 0, "repetition_penalty": 1, "seed": None, "stop": None,
}
BRANCH_FIELDS = ("model", "n", *SAMPLING_DEFAULTS)
LAST_SEED = "Invalid value for 'seed': expected a seed whose last Node's seed, seed + n - 1, is at most 9007199254740991."


@dataclass(frozen=True)
class Branch:
    model: str  # as it was asked for
    n: int
    fields: dict[str, Any]  # the sampling fields, defaults filled in, `seed` the first Node's

    def node_request(self, i: int, served_model_name: str) -> dict[str, Any]:
        """Node i's request, as the Node shows it: `model` as the served name, its own seed."""
        return {"model": served_model_name, **self.fields, "seed": self.fields["seed"] + i}

    def completion_body(self, prompt: str) -> dict[str, Any]:
        """The one Completion request that a Node of this Branch runs (n is 1 for each Node)."""
        body = {"model": self.model, "prompt": prompt, "stream": True}
        body.update({key: value for key, value in self.fields.items() if value is not None})
        return body

    def generation_config(self) -> dict[str, Any]:
        """The Loom's last settings, for its export file."""
        return {"model": self.model, "n": self.n, **self.fields}


def parse_branch(body: object) -> Branch:
    """The Branch's fields; 400 invalid_request for a field the table does not list, or a value
    that Completions refuses."""
    if not isinstance(body, dict):
        raise errors.InvalidRequest(Msg.BODY)
    reject_unknown_fields(body, BRANCH_FIELDS)
    if body.get("model") is None:
        raise errors.InvalidRequest(Msg.MISSING.format(path="model"), "model")
    # Completions' own checks of every type and range, for one Node's request.
    sampling = {key: body[key] for key in SAMPLING_DEFAULTS if body.get(key) is not None}
    parse_completion_request({"model": body["model"], "prompt": "x", **sampling, "stream": True})
    n = 1 if body.get("n") is None else integer(body["n"], "n", ge=1, le=MAX_NODES_PER_BRANCH)
    fields = {**SAMPLING_DEFAULTS, **sampling}
    fields["max_tokens"] = integer(fields["max_tokens"], "max_tokens", ge=1, le=MAX_NODE_TOKENS)
    if fields["seed"] is None:
        fields["seed"] = secrets.randbelow(SEED_DRAWN_BELOW)
    if fields["seed"] + n - 1 > LARGEST_SEED:
        raise errors.InvalidRequest(LAST_SEED, "seed")
    return Branch(model=body["model"], n=n, fields=fields)


def as_branch_param(param: str | None) -> str | None:
    """A Node's error names a field of the Branch, or null: a Branch has no `prompt`."""
    return param if param in BRANCH_FIELDS else None

