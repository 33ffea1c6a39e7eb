"""What the ledger's audit finds: one `Violation` per subject that breaks an invariant."""
from __future__ import annotations

import enum
from dataclasses import dataclass


class Invariant(str, enum.Enum):
    """The invariants a quiet ledger keeps (issue 38's chaos soak), each with what it says."""

    hold_held = "hold_held"
    hold_row = "hold_row"
    request_paid_twice = "request_paid_twice"
    work_paid_twice = "work_paid_twice"
    work_unpaid = "work_unpaid"
    work_lease_lapsed = "work_lease_lapsed"
    node_not_ended = "node_not_ended"
    run_not_ended = "run_not_ended"
    run_cut_cost = "run_cut_cost"
    budget_negative = "budget_negative"
    budget_unbalanced = "budget_unbalanced"
    allowance_negative = "allowance_negative"
    allowance_unbalanced = "allowance_unbalanced"

    @property
    def says(self) -> str:
        return _SAYS[self]


_SAYS = {
    Invariant.hold_held: "no Hold is left held",
    Invariant.hold_row: "an ended Hold has an end: settled or released, not running, released at 0 tokens",
    Invariant.request_paid_twice: "an API request (its request id) settles at most one Hold",
    Invariant.work_paid_twice: "a Job request, harvest, Node or Run settles at most one Hold, over all its attempts",
    Invariant.work_unpaid: "a succeeded Job request, harvest, Node or Run settled its Hold",
    Invariant.work_lease_lapsed: "no work row is running past its lease: it ended or is queued again",
    Invariant.node_not_ended: "a Loom Node is not queued or running when its work row ended",
    Invariant.run_not_ended: "a Playground Run is not queued or running when its work row ended",
    Invariant.run_cut_cost: "a Playground Run that failed without a settled Hold (a crash cut it) costs nothing",
    Invariant.budget_negative: "every Budget is at or above zero",
    Invariant.budget_unbalanced: "every Budget equals its Grants minus its settled usage and its held tokens",
    Invariant.allowance_negative: "every month's allowance left is at or above zero",
    Invariant.allowance_unbalanced: "every month's allowance used equals its settled usage and its held tokens",
}


def named(value: object) -> str:
    """An enum column's value as its word: SQLite's driver hands back the enum, asyncpg its text."""
    return str(getattr(value, "value", value))


@dataclass(frozen=True)
class Violation:
    """One subject (a Hold, a work row, a Budget, a User's month...) that breaks `invariant`."""

    invariant: Invariant
    subject: str  # the id of what breaks it, e.g. a Hold's id, or "user/month"
    detail: str
