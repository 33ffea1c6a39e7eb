"""How the ledger's tables spell their columns: stable constraint names, states as
VARCHARs with CHECK constraints, and the creation time.
"""
from __future__ import annotations

import enum

from sqlalchemy import (
    Column,
    Enum,
    Table,
)
from sqlmodel import SQLModel

from ledger.store.coltypes import UtcDateTime, utcnow

# Stable constraint names, so migrations (and SQLite's batch mode) can name
# the constraints they change.
SQLModel.metadata.naming_convention = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def _state(kind: type[enum.Enum], name: str) -> Column:
    """A VARCHAR with a CHECK of the enum's values, loaded as enum members."""
    sa_type = Enum(
        kind,
        name=name,
        native_enum=False,
        create_constraint=True,
        length=16,
        values_callable=lambda members: [member.value for member in members],
    )
    return Column(sa_type, nullable=False, default=next(iter(kind)))


def _created_at() -> Column:
    return Column(UtcDateTime(), nullable=False, default=utcnow)


def table_of(model: type[SQLModel]) -> Table:
    """The Table of a `table=True` model. SQLModel sets `__table__` on such a class at run time, but
    its type declares no such attribute, so the type checker sees none: this is the one place that
    reads it, and it checks what it read."""
    table = getattr(model, "__table__", None)
    if not isinstance(table, Table):
        raise TypeError(f"{model.__name__} is not a table model")
    return table
