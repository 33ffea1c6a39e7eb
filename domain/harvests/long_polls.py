"""The reads of a harvest that wait at once (`wait`), in this process: 4 a key and 8 in all (spec: Limits).
One per process, built by the composition root, so every request counts against the same places."""
from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any, Iterator


class LongPolls:
    def __init__(self, per_key: int = 4, in_all: int = 8) -> None:
        self.per_key, self.in_all = per_key, in_all
        self.by_key: Counter[Any] = Counter()

    @property
    def waiting(self) -> int:
        return sum(self.by_key.values())

    @contextlib.contextmanager
    def slot(self, key_id: Any) -> Iterator[bool]:
        """Whether this read may wait; its place is freed when it answers."""
        if self.by_key[key_id] >= self.per_key or self.waiting >= self.in_all:
            yield False
            return
        self.by_key[key_id] += 1
        try:
            yield True
        finally:
            self.by_key[key_id] -= 1
            if not self.by_key[key_id]:
                del self.by_key[key_id]
