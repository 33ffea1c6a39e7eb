"""A circuit breaker per model: 5 failures in a row hold the model back 60 s."""
from __future__ import annotations

import math
import time
from typing import Callable


class CircuitBreaker:
    def __init__(self, threshold: int = 5, open_seconds: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.threshold, self.open_seconds, self.clock = threshold, open_seconds, clock
        self.consecutive_failures = 0
        self.opened_at: float | None = None

    def seconds_left(self) -> float:
        if self.opened_at is None:
            return 0.0
        return max(0.0, self.opened_at + self.open_seconds - self.clock())

    @property
    def state(self) -> str:
        if self.opened_at is None:
            return "closed"
        return "open" if self.seconds_left() > 0 else "half_open"

    def retry_after(self) -> int | None:
        """Seconds until the model is tried again, or None when requests may pass."""
        if self.state != "open":
            return None
        return max(1, math.ceil(self.seconds_left()))

    def record_success(self) -> None:
        self.consecutive_failures, self.opened_at = 0, None

    def record_failure(self) -> None:
        self.consecutive_failures += 1
        # In half_open one failure opens it again; otherwise it takes `threshold`.
        if self.state == "half_open" or self.consecutive_failures >= self.threshold:
            self.opened_at = self.clock()
