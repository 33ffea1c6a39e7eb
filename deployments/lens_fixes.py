"""Fixes of vllm-lens 1.3.0 traps that live in the engine's worker process.

vLLM imports this module in its EngineCore process, as the worker extension
(`worker_extension_cls`), so the patches below apply where the hooks run.
"""
from __future__ import annotations

from typing import Any

import torch
from vllm_lens import _worker_ext as lens

import deployments.seeded_prefill_fix  # noqa: F401 - patches vLLM's CPU engine in this process
from vllm_lens._worker_ext import HiddenStatesExtension

# The positions of the forward pass that runs now: a decoder layer's first input.
_pass_positions: torch.Tensor | None = None
_original_make_hook = lens._make_hook
_original_apply_steering = lens._apply_steering


def _make_hook(extension: Any, layer_idx: int) -> Any:
    inner = _original_make_hook(extension, layer_idx)

    def hook(module: Any, inputs: Any, output: Any) -> Any:
        global _pass_positions
        first = inputs[0] if isinstance(inputs, tuple) and inputs else None
        _pass_positions = first if isinstance(first, torch.Tensor) and first.dim() == 1 else None
        return inner(module, inputs, output)

    return hook


def _apply_steering(configs: Any, layer_idx: int, target: Any, start: int, end: int, abs_start: int,
                    norm_ref: Any) -> Any:
    # vllm-lens trap: it reads `seq_lens` from the per-layer metadata dict, finds
    # none, and takes every decode step for position 0, so position-specific
    # vectors miss (or hit wrongly) the generated tokens. vLLM's own positions
    # tensor has each token's absolute position.
    if _pass_positions is not None and start < _pass_positions.shape[0]:
        abs_start = int(_pass_positions[start])
    return _original_apply_steering(configs, layer_idx, target, start, end, abs_start, norm_ref)


lens._make_hook = _make_hook
lens._apply_steering = _apply_steering


class FixedHiddenStatesExtension(HiddenStatesExtension):
    """vllm-lens's worker extension, with the patches of this module in force."""
