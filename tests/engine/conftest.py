"""The engine tier: the real vLLM engine (tests/conftest.py `tiny_engine`) and its oracle."""
from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def hf_model() -> Any:
    """HF transformers on the tiny model's weights (tests/hf_reference.py)."""
    import torch
    from transformers import AutoModelForCausalLM

    from deployments.catalog import load_catalog

    path = load_catalog("test").models["tiny-llama"].weights_path()
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
