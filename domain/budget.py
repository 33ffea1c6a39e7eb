"""The API's side of the ledger's Holds: messages, the clamp header, the spend stop."""
from __future__ import annotations

import dataclasses
import time
import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from domain import errors
from ledger.store import driver_sql
from ledger.store.coltypes import utcnow
from ledger.store.db import bound_engine
from ledger.store.survive import survive
from ledger.tokens.tables import Counting, UsageStatus
from ledger.tokens.leases import HoldLeases, new_owner
from ledger.tokens.holds import Shortfall, end_hold, end_hold_on

SPEND_STOP_TTL_S = 1.0
USER_SHORT = "This request can use up to {tokens} tokens, more than your token budget has left."
KEY_SHORT = "This request can use up to {tokens} tokens, more than this API key's token budget has left."
BOTH_SHORT = (
    "This request can use up to {tokens} tokens, more than your monthly allowance has left this month "
    "and more than your token budget has left. Your monthly allowance refills on {day} (UTC)."
)
ASK_MORE = " Ask for more tokens at {url}."


def budget_exceeded(shortfall: Shortfall, request_url: str) -> errors.BudgetExceeded:
    """The three variants of the spec; the User's own tokens end with where to ask for more."""
    if shortfall.key_budget:
        return errors.BudgetExceeded(KEY_SHORT.format(tokens=shortfall.tokens))
    template = BOTH_SHORT if shortfall.allowance > 0 else USER_SHORT
    message = template.format(tokens=shortfall.tokens, day=shortfall.refills_on.date().isoformat())
    return errors.BudgetExceeded(message + ASK_MORE.format(url=request_url))


def clamp_value(requested: int, applied: int, *, budget: bool, deadline: bool, source: str) -> str | None:
    """X-Acs-Max-Tokens-Clamped, as the spec formats it; None when nothing was lowered."""
    if not budget and not deadline:
        return None
    reason = "deadline+budget" if budget and deadline else ("budget" if budget else "deadline")
    value = f"requested={requested},applied={applied},reason={reason}"
    # The cookbook: "A header with reason=deadline has no source."
    return value if reason == "deadline" else f"{value},source={source}"


class TokenLedger:
    """What the routes ask of the ledger about tokens: Holds and their ends."""

    def __init__(self, sessions: Any, write_sessions: Any, *, request_url: str,
                 default_allowance: int, owner: str | None = None, lease_s: float = 60.0) -> None:
        self.sessions, self.write_sessions = sessions, write_sessions
        self.request_url, self.default_allowance = request_url, default_allowance
        self.owner = owner or new_owner()
        self.leases = HoldLeases(write_sessions, self.owner, lease_s=lease_s, every_s=lease_s / 4)
        self._spend_locked, self._spend_read_at = False, float("-inf")

    @property
    def write_engine(self) -> AsyncEngine | None:
        """The hot path: Holds and their ends straight on the write sessions' engine, no session."""
        return bound_engine(self.write_sessions)

    async def check_spend_stop(self) -> None:
        if await self.spend_stopped():
            raise errors.SpendCap(errors.SPEND_CAP_MESSAGE)

    async def spend_stopped(self) -> bool:
        """Read at most once a second: every request asks, and the stop rarely changes."""
        from ledger.tokens.spend import spend_stop, spend_stop_locked_on

        now = time.monotonic()
        if now - self._spend_read_at >= SPEND_STOP_TTL_S:
            engine = driver_sql.driven_engine(self.sessions)
            if engine is not None:
                self._spend_locked = await spend_stop_locked_on(engine)
            else:
                async with self.sessions() as session:
                    self._spend_locked = (await spend_stop(session)).locked
            self._spend_read_at = now
        return self._spend_locked

    async def hold(self, ask: Any) -> Any:
        """A Held, or raises 429 budget_exceeded with the spec's message."""
        from ledger.tokens.holds import take_hold, take_hold_on

        ask = dataclasses.replace(ask, owner=self.owner, lease_s=self.leases.lease_s)
        if self.write_engine is not None:
            result = await take_hold_on(self.write_engine, ask, default_allowance=self.default_allowance)
        else:
            async with self.write_sessions() as session:
                result = await take_hold(session, ask, default_allowance=self.default_allowance)
        if isinstance(result, Shortfall):
            await self._record_refusal(ask)
            raise budget_exceeded(result, self.request_url)
        return result

    async def check_fits(self, ask: Any) -> None:
        """429 budget_exceeded unless the tokens could hold `ask` now; holds nothing."""
        from ledger.tokens.holds import check_hold

        async with self.write_sessions() as session:
            shortfall = await check_hold(session, ask, default_allowance=self.default_allowance)
        if shortfall is not None:
            await self._record_refusal(ask)
            raise budget_exceeded(shortfall, self.request_url)

    async def _record_refusal(self, ask: Any) -> None:
        """Counted for the Analytics; a failed write must not change the answer, the 429."""
        from ledger.tokens.refusals import record_refusal

        async def record() -> None:
            async with self.write_sessions() as session:
                await record_refusal(session, ask, utcnow())
        try:
            await survive(record())
        except Exception:  # noqa: BLE001 - logged by survive
            pass

    async def end(self, hold_id: uuid.UUID, used: int | None, counting: Counting | None,
                  status: UsageStatus) -> None:
        # A client that goes away must not leave the Hold open.
        await survive(self._end(hold_id, used, counting, status))

    async def _end(self, hold_id: uuid.UUID, used: int | None, counting: Counting | None,
                   status: UsageStatus) -> None:
        if self.write_engine is not None:
            await end_hold_on(self.write_engine, hold_id, used=used, counting=counting, status=status)
            return
        async with self.write_sessions() as session:
            await end_hold(session, hold_id, used=used, counting=counting, status=status)
