"""The oracle: HF transformers on the same weights as the engine.

Layer L of a read is the output of decoder block L, before the final norm.
HF's `hidden_states[L + 1]` is that, except for the last Layer, which HF
gives after the norm; forward hooks on the blocks read every Layer the same
way. A steer is the same addition, made by a forward hook on block L.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

import numpy as np
import torch

SKY_IDS = [128000, 791, 13180, 374]  # "The sky is" with the Llama 3.1 tokenizer


@contextlib.contextmanager
def steered(model: Any, adds: dict[int, np.ndarray]) -> Iterator[None]:
    """Add `adds[L]` to the output of block L: a vector for every position, or
    rows [positions, hidden] for the first positions of the pass."""
    def add(layer: int) -> Any:
        def hook(_module: Any, _inputs: Any, out: Any) -> Any:
            hidden = out[0] if isinstance(out, tuple) else out
            rows = torch.from_numpy(np.asarray(adds[layer], dtype=np.float32))
            hidden = hidden + (rows if rows.ndim == 1 else rows[: hidden.shape[1]])[None]
            return (hidden, *out[1:]) if isinstance(out, tuple) else hidden
        return hook

    hooks = [model.model.layers[layer].register_forward_hook(add(layer)) for layer in adds]
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()


def reference(model: Any, ids: list[int], layers: list[int], adds: dict[int, np.ndarray] | None = None) -> np.ndarray:
    """[layers, tokens, hidden]: the Layers of one forward pass over `ids`."""
    outputs: dict[int, torch.Tensor] = {}
    with steered(model, adds or {}):
        hooks = [block.register_forward_hook(lambda _m, _i, out, i=i: outputs.__setitem__(
            i, out[0] if isinstance(out, tuple) else out)) for i, block in enumerate(model.model.layers)]
        try:
            with torch.no_grad():
                model(torch.tensor([ids]))
        finally:
            for hook in hooks:
                hook.remove()
    return np.stack([outputs[layer][0].numpy() for layer in layers])


def greedy(model: Any, ids: list[int], steps: int, adds: dict[int, np.ndarray] | None = None) -> list[int]:
    """`ids` and `steps` tokens more, each the argmax, with the steers of
    `adds` (one vector per Layer) at every position that runs."""
    ids = list(ids)
    with steered(model, adds or {}), torch.no_grad():
        for _ in range(steps):
            ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
    return ids
