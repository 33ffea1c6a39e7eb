"""The audit of tokens: Holds, and the counters they charge (Budgets, monthly allowances).

The identities follow the only writers of the counters, ledger/tokens/holds.py and grants.py:

- A Hold takes its `tokens` whole from where it pays (`pays_from`: this month's allowance of
  its `month`, or the User's Budget), and from its key's own Budget too (`key_budget`). Its
  end hands back `tokens - used` (a release: `used` 0). So a User's month used
  = Σ settled `used` + Σ held `tokens` of its Holds paid from the allowance in that month, exactly.
- A Budget = Σ its Grants − Σ settled `used` − Σ held `tokens` of the Holds that paid it, except
  that a settlement past its Hold (`used > tokens`) takes the Budget down to 0 and no lower
  (`_floor0`): then the Budget may stand above that sum by at most those settlements' excess.
  `set_budget` (an admin's "budget set") writes a number and no Grant: a Budget that an admin set
  is reported here, since nothing in the ledger says it was set.
"""
from __future__ import annotations

import uuid
from collections import defaultdict
from typing import Any

from sqlalchemy import and_, case, func, select, true
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.accounts.tables import User
from ledger.audit.violations import Invariant, Violation, named
from ledger.store.columns import table_of
from ledger.tokens.tables import Budget, Grant, Hold, HoldState, MonthlyUsage, PaysFrom, UsageSource, UsageStatus

_holds, _budgets, _grants = table_of(Hold).c, table_of(Budget).c, table_of(Grant).c
_usage, _users = table_of(MonthlyUsage).c, table_of(User).c
_SETTLED, _HELD = HoldState.settled.value, HoldState.held.value


async def holds(session: AsyncSession) -> list[Violation]:
    """Holds still held, ended Holds without a proper end, API requests that settled twice."""
    found: list[Violation] = []
    held = await session.execute(select(_holds.id, _holds.source, _holds.request_id, _holds.owner,
                                        _holds.lease_until).where(_holds.state == _HELD).order_by(_holds.id))
    for hold_id, source, request_id, owner, lease_until in held:
        found.append(Violation(Invariant.hold_held, str(hold_id),
                               f"{named(source)} request {request_id!r} of {owner!r}, lease until {lease_until}"))
    running = UsageStatus.running.value
    bad = (
        (_holds.state == _HELD) & (_holds.status != running),
        (_holds.state != _HELD) & ((_holds.status == running) | _holds.ended_at.is_(None)),
        (_holds.state == HoldState.released.value) & (_holds.used != 0),
    )
    rows = await session.execute(select(_holds.id, _holds.state, _holds.status, _holds.used, _holds.ended_at)
                                 .where(bad[0] | bad[1] | bad[2]).order_by(_holds.id))
    for hold_id, state, status, used, ended_at in rows:
        found.append(Violation(Invariant.hold_row, str(hold_id),
                               f"state {named(state)}, status {named(status)}, used {used}, ended at {ended_at}"))
    twice = await session.execute(
        select(_holds.request_id, func.count(), func.sum(_holds.used))
        .where(_holds.state == _SETTLED, _holds.source == UsageSource.api.value, _holds.request_id != "")
        .group_by(_holds.request_id).having(func.count() > 1).order_by(_holds.request_id))
    for request_id, count, used in twice:
        found.append(Violation(Invariant.request_paid_twice, request_id,
                               f"{count} settled Holds, {used} tokens in all"))
    return found


def _charged() -> tuple[Any, Any]:
    """Per Hold, what it takes from its counters now, and what a settlement took past its Hold."""
    now = case((_holds.state == _SETTLED, _holds.used), (_holds.state == _HELD, _holds.tokens), else_=0)
    past = case((and_(_holds.state == _SETTLED, _holds.used > _holds.tokens), _holds.used - _holds.tokens), else_=0)
    return func.coalesce(func.sum(now), 0), func.coalesce(func.sum(past), 0)


async def budgets(session: AsyncSession) -> list[Violation]:
    """Every Budget, the User's own and a key's: at or above 0, and its Grants less what paid from it."""
    grants: dict[tuple[uuid.UUID, uuid.UUID | None], int] = {
        (user_id, key_id): int(total) for user_id, key_id, total in await session.execute(
            select(_grants.user_id, _grants.key_id, func.sum(_grants.tokens)).group_by(_grants.user_id, _grants.key_id))}
    spent, past = _charged()
    paid: dict[tuple[uuid.UUID, uuid.UUID | None], tuple[int, int]] = {}
    for user_id, taken, over in await session.execute(
            select(_holds.user_id, spent, past).where(_holds.pays_from == PaysFrom.budget.value)
            .group_by(_holds.user_id)):
        paid[(user_id, None)] = (int(taken), int(over))
    for user_id, key_id, taken, over in await session.execute(
            select(_holds.user_id, _holds.key_id, spent, past).where(_holds.key_budget == true())
            .group_by(_holds.user_id, _holds.key_id)):
        paid[(user_id, key_id)] = (int(taken), int(over))
    rows = {(user_id, key_id): (budget_id, int(tokens)) for budget_id, user_id, key_id, tokens in
            await session.execute(select(_budgets.id, _budgets.user_id, _budgets.key_id, _budgets.tokens))}
    found: list[Violation] = []
    for owner in sorted(set(rows) | set(paid) | set(grants), key=str):
        user_id, key_id = owner
        budget_id, tokens = rows.get(owner, (None, 0))
        subject = str(budget_id) if budget_id else f"{user_id}/{key_id or 'user'} (no Budget row)"
        whose = f"user {user_id}" + (f" key {key_id}" if key_id else "")
        if tokens < 0:
            found.append(Violation(Invariant.budget_negative, subject, f"{whose}: {tokens} tokens"))
        granted = grants.get(owner, 0)
        taken, over = paid.get(owner, (0, 0))
        expected = granted - taken
        if not expected <= tokens <= expected + over:
            allowed = f" (up to {expected + over} after settlements past their Holds)" if over else ""
            found.append(Violation(Invariant.budget_unbalanced, subject,
                                   f"{whose}: {tokens} tokens, Grants {granted} − settled and held {taken} "
                                   f"= {expected}{allowed}"))
    return found


async def allowances(session: AsyncSession, default_allowance: int) -> list[Violation]:
    """Every User's month: used at or below its allowance and at or above 0, and the sum of its Holds."""
    spent, _ = _charged()
    expected: dict[tuple[uuid.UUID, str], int] = defaultdict(int)
    for user_id, month, taken in await session.execute(
            select(_holds.user_id, _holds.month, spent).where(_holds.pays_from == PaysFrom.allowance.value)
            .group_by(_holds.user_id, _holds.month)):
        expected[(user_id, month)] = int(taken)
    allowance_of = {user_id: default_allowance if own is None else int(own) for user_id, own in
                    await session.execute(select(_users.id, _users.monthly_allowance))}
    used_of = {(user_id, month): int(used) for user_id, month, used in
               await session.execute(select(_usage.user_id, _usage.month, _usage.used))}
    found: list[Violation] = []
    for owner in sorted(set(used_of) | set(expected), key=lambda o: (str(o[0]), o[1])):
        user_id, month = owner
        used, subject = used_of.get(owner, 0), f"{user_id}/{month}"
        allowance = allowance_of.get(user_id, default_allowance)
        if used < 0 or used > allowance:
            found.append(Violation(Invariant.allowance_negative, subject,
                                   f"used {used} of an allowance of {allowance}: {allowance - used} left"))
        if used != expected.get(owner, 0):
            found.append(Violation(Invariant.allowance_unbalanced, subject,
                                   f"used {used}, settled and held {expected.get(owner, 0)}"))
    return found
