"""The check of bench/harvest_gpu.py: prompts' rows, as read back from their shards, against a float32
reference of the same weights.

The reference is Hugging Face's own model class built in float32 with the blocks up to the last Layer
read, the bfloat16 model's weights loaded into it (exact: every bfloat16 is a float32), and run one
prompt at a time, unpadded, with forward hooks on the blocks: nothing of the engine's packing,
padding or capture is shared with it. Float32 matmuls at full precision (no TF32).

Tolerance, in units of bfloat16's unit roundoff u = 2**-8 (the largest relative error of rounding
one number to bfloat16's 8 significant bits). A pass in bfloat16 rounds at every block, and the
blocks' errors add up like independent ones, so the error of Layer L grows as the square root of the
L + 1 blocks that ran: per Layer, the norm-relative error |got - ref| / |ref| (Frobenius, over the
prompt's tokens and the hidden size) at most 6u x sqrt(L + 1), and the max-relative error
max|got - ref| / max|ref| at most 12u x sqrt(L + 1). Measured on a CPU at Llama 3.1 8B's shape
(random weights, std 0.02, a 256-token prompt, bfloat16 against float32 block by block): 2.8u to
2.9u x sqrt(L + 1) norm-relative at every Layer from 0 to 31 (2.8u at Layer 0, 12.5u at 19, 16.2u
at 31), and max-relative within 3.4u x sqrt(L + 1). Rows of another prompt, or shifted by a token, are
off by 1.1 to 1.4 (tests/unit/test_bench_harvest_gpu.py, on the tiny model).
"""
from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import torch

from harvest.torch_forward import block_output, decoder_blocks

UNIT_ROUNDOFF = 2.0**-8
NORM_TOLERANCE = 6 * UNIT_ROUNDOFF  # times sqrt(L + 1) for Layer L
MAX_TOLERANCE = 12 * UNIT_ROUNDOFF  # likewise


def as_float32(rows: np.ndarray) -> np.ndarray:
    """Rows as the engine hands them over (uint16 bfloat16 bits, or float32) in float32."""
    if rows.dtype == np.uint16:
        return (rows.astype(np.uint32) << 16).view(np.float32)
    return np.asarray(rows, dtype=np.float32)


def float32_reference_model(model: Any, last_layer: int) -> Any:
    """Blocks 0..last_layer of `model`'s class in float32 on its device, with its weights."""
    from transformers import AutoModel

    config = copy.deepcopy(model.config)
    config.num_hidden_layers = last_layer + 1
    device = next(model.parameters()).device
    with torch.device(device):
        reference = AutoModel.from_config(config, dtype=torch.float32, attn_implementation="sdpa")
    # The later blocks' weights have no place in the reference: unexpected keys, left out.
    missing, _ = reference.load_state_dict(model.state_dict(), strict=False)
    if missing:
        raise RuntimeError(f"the float32 reference got no weights for {missing[:4]}")
    return reference.eval()


def reference_rows(reference: Any, tokens: np.ndarray, layers: list[int]) -> np.ndarray:
    """[layers, tokens, hidden] float32: the blocks' outputs of one unpadded pass over `tokens`."""
    outputs: dict[int, torch.Tensor] = {}
    blocks = decoder_blocks(reference)
    hooks = [blocks[layer].register_forward_hook(
        lambda _m, _i, out, layer=layer: outputs.__setitem__(layer, block_output(out)[0].float()))
        for layer in layers]
    device = next(reference.parameters()).device
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        with torch.inference_mode():
            reference(input_ids=torch.as_tensor(tokens, dtype=torch.long, device=device)[None], use_cache=False)
    finally:
        torch.set_float32_matmul_precision(previous)
        for hook in hooks:
            hook.remove()
    return torch.stack([outputs[layer] for layer in layers]).cpu().numpy()


def layer_errors(got: np.ndarray, expected: np.ndarray) -> list[tuple[float, float]]:
    """Per Layer: (norm-relative, max-relative) error of `got` against `expected`, both float32."""
    errors = []
    for got_layer, expected_layer in zip(got.astype(np.float64), expected.astype(np.float64)):
        difference = got_layer - expected_layer
        errors.append((float(np.linalg.norm(difference) / np.linalg.norm(expected_layer)),
                       float(np.abs(difference).max() / np.abs(expected_layer).max())))
    return errors


def tolerances(layer: int) -> tuple[float, float]:
    """(norm-relative, max-relative) error allowed at Layer `layer`: the module's doc says why."""
    blocks = math.sqrt(layer + 1)
    return NORM_TOLERANCE * blocks, MAX_TOLERANCE * blocks


def within_tolerance(layers: list[int], errors: list[tuple[float, float]]) -> bool:
    """errors: one (norm-relative, max-relative) pair per Layer of `layers`."""
    return all(norm <= tolerances(layer)[0] and largest <= tolerances(layer)[1]
               for layer, (norm, largest) in zip(layers, errors))


def check_prompts(model: Any, layers: list[int], prompts: dict[int, tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """Each prompt (index -> (token ids, rows as read back)) against the float32 reference."""
    reference = float32_reference_model(model, layers[-1])
    per_prompt = {}
    try:
        for index, (tokens, rows) in sorted(prompts.items()):
            per_prompt[index] = layer_errors(as_float32(rows), reference_rows(reference, tokens, layers))
    finally:
        del reference
    slots = range(len(layers))
    return {
        "prompts": sorted(per_prompt),
        "tokens": {index: int(len(prompts[index][0])) for index in per_prompt},
        # Per Layer, the largest over the prompts, and what the Layer allows.
        "norm_relative": [max((per_prompt[i][s][0] for i in per_prompt), default=None) for s in slots],
        "max_relative": [max((per_prompt[i][s][1] for i in per_prompt), default=None) for s in slots],
        "tolerances": [tolerances(layer) for layer in layers],
        "passed": bool(per_prompt) and all(within_tolerance(layers, e) for e in per_prompt.values()),
    }
