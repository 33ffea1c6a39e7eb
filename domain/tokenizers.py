"""The models' own tokenizers, loaded in the API so caps and Holds count
tokens exactly as Inference reads them, without waking a cold model."""
from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any


class ModelTokenizer:
    def __init__(self, hf_tokenizer: Any) -> None:
        self._tok = hf_tokenizer

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=add_special_tokens))

    @lru_cache(maxsize=65536)
    def decode(self, token_id: int) -> str:
        return self._tok.decode([token_id])

    @property
    def vocab_size(self) -> int:
        return len(self._tok)


class TokenizerRegistry:
    def __init__(self) -> None:
        self._loaded: dict[str, ModelTokenizer] = {}
        self._lock = threading.Lock()

    def get(self, model: Any) -> ModelTokenizer:
        with self._lock:
            if model.id not in self._loaded:
                from transformers import AutoTokenizer

                self._loaded[model.id] = ModelTokenizer(AutoTokenizer.from_pretrained(model.tokenizer_path()))
            return self._loaded[model.id]
