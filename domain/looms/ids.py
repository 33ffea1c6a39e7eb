"""A Loom's or a Node's id as a path gives it."""
from __future__ import annotations

import uuid

from domain.completions.validation import bad_value

EXAMPLE_ID = "01a12e70-9370-7a9b-87d6-4c3d2621969e"


def parse_id(value: str, what: str) -> uuid.UUID:
    """A path id; one that is not a UUID is not valid (400, as DESIGN.md decided for every path id)."""
    try:
        return uuid.UUID(value)
    except ValueError:
        name = "Loom" if what == "loom" else "Node"
        raise bad_value(f"{what}_id", f"a {name} id, a UUID such as {EXAMPLE_ID}") from None
