"""How one Completion's Hold ends: one rule for every way a request ends."""
from __future__ import annotations

import uuid
from typing import Any

from ledger.tokens.tables import Counting, UsageStatus
from ledger.tokens.holds import HoldAsk


class Settlement:
    """Ends the Hold exactly once; later calls do nothing."""

    def __init__(self, ledger: Any, hold_id: uuid.UUID, held_tokens: int, ask: HoldAsk | None = None,
                 counts: Any = None) -> None:
        self.ledger, self.hold_id, self.held_tokens = ledger, hold_id, held_tokens
        # What was held (the model, the source and the prompts' tokens) and where the metrics count
        # its tokens (domain.metrics.counts.Counts, the process's: the ingress's or the Runner's).
        self.ask, self.counts = ask, counts
        self.ended = False

    async def _end(self, used: int | None, counting: Counting | None, status: UsageStatus) -> None:
        if not self.ended:
            self.ended = True
            await self.ledger.end(self.hold_id, used, counting, status)
            if used is not None and self.ask is not None and self.counts is not None:
                self.counts.count_settled_tokens(self.ask.model, self.ask.source.value, self.ask.prompt_tokens, used)

    async def reported(self, used: int) -> None:
        """Inference answered: pay its usage, the rest goes back."""
        await self._end(used, Counting.reported, UsageStatus.completed)

    async def partial(self, sent: int, status: UsageStatus) -> None:
        """A stream stopped early (closed, broken, failed): pay what it sent."""
        await self._end(sent, Counting.partial, status)

    async def whole(self) -> None:
        """A request without a stream stopped after it reached Inference: no count, pay the Hold."""
        await self._end(self.held_tokens, Counting.held, UsageStatus.stopped)

    async def release(self) -> None:
        """Refused, failed before a token, never reached Inference, or our own failure: free."""
        await self._end(None, None, UsageStatus.failed)
