"""The torch engine's packing (harvest/torch_forward.py `pack`): with shared rows, a CPU's default, short
prompts fill the room that a batch's longest leaves in its rows, and every prompt still runs once,
whole, in a row no wider than the batch's longest, within the budget."""
from __future__ import annotations

import numpy as np
import pytest

from harvest.torch_forward import pack


def test_short_prompts_fill_the_rows_that_the_longest_leaves() -> None:
    (batch,) = pack([6, 2, 3, 1], 12, share_rows=True)
    assert batch.members == [0, 2, 1, 3]  # longest first
    assert batch.rows == [[0], [1, 2, 3]]  # 3 + 2 + 1 tokens in the room of a row of 6
    assert batch.padded_tokens == 12 and batch.shares_rows


def test_without_sharing_each_prompt_has_a_row_of_its_own() -> None:
    batches = pack([6, 2, 3, 1], 12)
    assert [(b.members, b.rows) for b in batches] == [([0, 2], [[0], [1]]), ([1, 3], [[0], [1]])]
    assert not any(b.shares_rows for b in batches)


@pytest.mark.parametrize("budget", [1, 48, 256, 4096])
@pytest.mark.parametrize("share_rows", [True, False])
def test_each_prompt_runs_once_whole_in_a_row_within_the_batch_and_its_budget(budget: int,
                                                                             share_rows: bool) -> None:
    lengths = np.random.default_rng(3).integers(1, 80, size=300).tolist()
    batches = pack(lengths, budget, share_rows)
    assert sorted(i for b in batches for i in b.members) == list(range(len(lengths)))
    for b in batches:
        assert b.lengths == [lengths[i] for i in b.members] == sorted(b.lengths, reverse=True)
        assert sorted(k for row in b.rows for k in row) == list(range(len(b.members)))
        assert all(sum(b.lengths[k] for k in row) <= b.lengths[0] for row in b.rows)
        assert b.padded_tokens <= budget or len(b.rows) == 1


@pytest.mark.parametrize("seed", range(5))
def test_a_call_of_64_prompts_pads_little_when_they_share_rows(seed: int) -> None:
    """The pipeline's call: 64 prompts of random lengths. In rows of their own they pad to the longest."""
    lengths = np.random.default_rng(seed).integers(1, 80, size=64).tolist()
    shared, own = pack(lengths, 4096, share_rows=True), pack(lengths, 4096)
    assert len(shared) == 1
    assert shared[0].padded_tokens < 1.2 * sum(lengths)
    assert shared[0].padded_tokens < 0.8 * sum(b.padded_tokens for b in own)
