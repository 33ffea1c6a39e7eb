"""Prompts that share a row in the torch forward engine (a CPU's default, harvest/torch_forward.py) read
what HF reads of each alone, and what they read with a row each; the manifest's runtime says so."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from deployments.catalog import load_catalog
from deployments.engine import ForwardRequest
from harvest.torch_forward import TorchForward, pack
from tests.hf_reference import reference

MODEL = load_catalog("test").models["tiny-llama"]
FLOAT32 = 1e-5  # relative: float32 sums in another order
LAST = 3
# One long prompt and short ones that fit the room it leaves in its batch's rows.
PROMPTS = [[128000, *np.random.default_rng(n).integers(200, 120000, size=n - 1).tolist()]
           for n in (30, 12, 9, 5, 3, 2, 1, 17)]


def engine(share_rows: bool | None) -> TorchForward:
    from transformers import AutoModel

    model = AutoModel.from_pretrained(MODEL.weights_path(), dtype=torch.float32, attn_implementation="sdpa")
    return TorchForward(model, model_id=MODEL.served_model_name, max_model_len=MODEL.engine.max_model_len,
                        token_budget=64, share_rows=share_rows)


def relative_error(got: np.ndarray, expected: np.ndarray) -> float:
    return float(np.abs(got - expected).max() / np.abs(expected).max())


@pytest.fixture(scope="module")
def engines() -> Any:
    made = {"cpu default": engine(None), "own rows": engine(False)}
    yield made
    for one in made.values():
        one.shutdown()


def test_the_prompts_share_rows_on_a_cpu_by_default(engines: dict[str, TorchForward]) -> None:
    assert engines["cpu default"].share_rows and engines["cpu default"].describe()["share_rows"] is True
    assert engines["own rows"].describe()["share_rows"] is False
    assert any(batch.shares_rows for batch in pack(list(map(len, PROMPTS)), 64, share_rows=True))


async def test_prompts_sharing_a_row_read_what_hf_reads_of_each_alone(engines: dict[str, TorchForward],
                                                                    hf_model: Any) -> None:
    shared = await engines["cpu default"].forward(ForwardRequest("shared", PROMPTS, [0, 2, LAST]))
    own = await engines["own rows"].forward(ForwardRequest("own", PROMPTS, [0, 2, LAST]))
    assert [r.token_ids for r in shared] == PROMPTS
    for prompt, got, alone in zip(PROMPTS, shared, own):
        assert got.rows.shape == (3, len(prompt), 64)
        assert relative_error(got.rows, reference(hf_model, prompt, [0, 2, LAST])) < FLOAT32
        assert relative_error(got.rows, alone.rows) < FLOAT32


class IgnoresPositions(torch.nn.Module):
    """A model whose attention would let a prompt see the one before it in its row: it drops the
    position ids, so the packed sequences' mask is never made."""

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.model, self.config = inner, inner.config

    def forward(self, input_ids: torch.Tensor, use_cache: bool = False, position_ids: Any = None) -> Any:
        return self.model(input_ids=input_ids, use_cache=use_cache)


async def test_a_model_that_would_mix_prompts_in_a_row_gives_each_prompt_a_row(hf_model: Any) -> None:
    from transformers import AutoModel

    inner = AutoModel.from_pretrained(MODEL.weights_path(), dtype=torch.float32, attn_implementation="sdpa")
    mixing = TorchForward(IgnoresPositions(inner), model_id=MODEL.served_model_name,
                          max_model_len=MODEL.engine.max_model_len, token_budget=64)
    try:
        assert mixing.share_rows is False and mixing.describe()["share_rows"] is False
        got = await mixing.forward(ForwardRequest("mixing", PROMPTS, [0, LAST]))
        for prompt, rows in zip(PROMPTS, got):
            assert relative_error(rows.rows, reference(hf_model, prompt, [0, LAST])) < FLOAT32
    finally:
        mixing.shutdown()
