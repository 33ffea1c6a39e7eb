"""How the admin command line prints: aligned tables and fields, or one JSON document."""
from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ledger.tokens import usage


def when(moment: datetime | None) -> str:
    return "-" if moment is None else moment.strftime("%Y-%m-%d %H:%M UTC")


def dollars(amount: float) -> str:
    return f"${amount:,.2f}"


def print_json(document: Any) -> None:
    print(json.dumps(document, indent=2))


def print_fields(pairs: Sequence[tuple[str, str]]) -> None:
    width = max(len(label) for label, _ in pairs)
    for label, value in pairs:
        print(f"{label.ljust(width)}  {value}")


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())


def print_key_table(lines: Sequence[usage.KeyLine]) -> None:
    header = ("ID", "NAME", "KEY", "STATUS", "TOKENS THIS MONTH", "BUDGET LEFT", "CREATED", "LAST USED")
    print_table(header, [_key_row(line) for line in lines])


def _key_row(line: usage.KeyLine) -> tuple[str, ...]:
    key = line.key
    budget = "-" if line.budget_left is None else str(line.budget_left)
    return (str(key.id), key.name, f"{key.prefix}...", key.status.value, str(line.tokens_this_month), budget,
            when(key.created_at), when(key.last_used_at))
