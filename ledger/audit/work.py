"""The audit of background work: Jobs, harvests, Loom Nodes and Playground Runs after the leases'
time ("When the API restarts": each ends, or is queued again, and spends tokens once).

A work row's attempts each take a Hold: a Job's, a Node's and a Run's carry the request id
`<row's request id>-<attempt>` (the engine's request id), a harvest's the row's own request id,
and the row's `hold_id` names the Hold of its last attempt. A cut attempt's Hold is released;
only the attempt that ends the row settles one.
"""
from __future__ import annotations

import re
import uuid
from collections import defaultdict
from datetime import datetime

from sqlalchemy import select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.audit.violations import Invariant, Violation, named
from ledger.store.columns import table_of
from ledger.tokens.tables import Hold, HoldState, UsageSource
from ledger.work.tables import ENDED, GROWING, RUN_GROWING, LoomNode, PlaygroundRun, RunStatus, Work, WorkStatus

_holds, _work_table = table_of(Hold).c, table_of(Work)
_work = _work_table.c
_nodes, _runs = table_of(LoomNode).c, table_of(PlaygroundRun).c
_ATTEMPT = re.compile(r"-\d+$")
_ENDED = [status.value for status in ENDED]


async def _settled_per_work(session: AsyncSession) -> tuple[dict[uuid.UUID, list[tuple[uuid.UUID, int]]],
                                                            dict[uuid.UUID, tuple[str, str, str]]]:
    """Each work row's settled Holds (id, used) over all its attempts, and each row's (kind, status, request id)."""
    found = list(await session.execute(select(_work.id, _work.kind, _work.status, _work.request_id,
                                              _work.hold_id)))
    rows = {work_id: (kind, status, request_id) for work_id, kind, status, request_id, _ in found}
    by_request = {request_id: work_id for work_id, (_, _, request_id) in rows.items()}
    by_hold = {hold_id: work_id for work_id, _, _, _, hold_id in found if hold_id is not None}
    settled: dict[uuid.UUID, list[tuple[uuid.UUID, int]]] = defaultdict(list)
    for hold_id, request_id, used in await session.execute(
            select(_holds.id, _holds.request_id, _holds.used)
            .where(_holds.state == HoldState.settled.value, _holds.source != UsageSource.api.value)
            .order_by(_holds.id)):
        work_id = (by_hold.get(hold_id) or by_request.get(request_id)
                   or by_request.get(_ATTEMPT.sub("", request_id)))
        if work_id is not None:
            settled[work_id].append((hold_id, int(used)))
    return settled, rows


async def work(session: AsyncSession, now: datetime) -> list[Violation]:
    """Rows paid twice or not at all, rows running past their lease, Nodes and Runs left growing."""
    settled, rows = await _settled_per_work(session)
    found: list[Violation] = []
    for work_id in sorted(rows):
        kind, status, request_id = rows[work_id]
        paid = settled.get(work_id, [])
        if len(paid) > 1:
            found.append(Violation(Invariant.work_paid_twice, str(work_id),
                                   f"{named(kind)} {request_id}: {len(paid)} settled Holds "
                                   f"({', '.join(f'{hold_id}: {used}' for hold_id, used in paid)})"))
        if status == WorkStatus.succeeded.value and not paid:
            found.append(Violation(Invariant.work_unpaid, str(work_id), f"{named(kind)} {request_id} succeeded unpaid"))
    lapsed = await session.execute(
        select(_work.id, _work.kind, _work.lease_owner, _work.lease_until, _work.attempts)
        .where(_work.status == WorkStatus.running.value).order_by(_work.id))
    for work_id, kind, owner, until, attempts in lapsed:
        if until is None or until < now:
            found.append(Violation(Invariant.work_lease_lapsed, str(work_id),
                                   f"{named(kind)} running under {owner!r}, lease until {until}, attempt {attempts}"))
    nodes = await session.execute(
        select(_nodes.id, _nodes.status, _work.status).join(_work_table, _work.id == _nodes.work_id)
        .where(_nodes.status.in_([status.value for status in GROWING]), _work.status.in_(_ENDED),
               _nodes.deleted_at.is_(None)).order_by(_nodes.id))
    for node_id, node_status, work_status in nodes:
        found.append(Violation(Invariant.node_not_ended, str(node_id),
                               f"Node {named(node_status)}, its work row {named(work_status)}"))
    runs = await session.execute(
        select(_runs.id, _runs.number, _runs.status, _runs.used_tokens, _work.id, _work.status)
        .join(_work_table, _work.id == _runs.work_id).order_by(_runs.id))
    growing = [status.value for status in RUN_GROWING]
    for run_id, number, run_status, used_tokens, work_id, work_status in runs:
        if run_status in growing and work_status in _ENDED:
            found.append(Violation(Invariant.run_not_ended, str(run_id),
                                   f"Run {number} {named(run_status)}, its work row {named(work_status)}"))
        if (run_status == RunStatus.failed.value and work_status == WorkStatus.failed.value
                and not settled.get(work_id) and used_tokens != 0):
            found.append(Violation(Invariant.run_cut_cost, str(run_id),
                                   f"Run {number} failed with no settled Hold shows {used_tokens} tokens used"))
    return found

