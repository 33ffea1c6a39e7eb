"""The API's own failures of each UTC day, for Analytics' Platform tab (spec: "the server errors and the
timeouts"): how many answers were a 5xx error object, and how many of those were Inference's timeout
(504 upstream_deadline). One row per day and kind, counted up in place, so that every replica adds to
the same row and a day costs two rows."""
from __future__ import annotations

import enum
from collections import defaultdict
from datetime import date
from typing import ClassVar

from sqlalchemy import Column, Date, Integer, String
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Field, SQLModel, col, select
from sqlmodel.ext.asyncio.session import AsyncSession


class ErrorKind(str, enum.Enum):
    server_error = "server_error"  # a 5xx answer other than a timeout
    timeout = "timeout"            # Inference did not answer in time (504 upstream_deadline)


class ServerErrorDay(SQLModel, table=True):
    __tablename__: ClassVar[str] = "server_error_days"

    day: date = Field(sa_column=Column(Date(), primary_key=True))
    kind: str = Field(sa_column=Column(String(20), primary_key=True))
    count: int = Field(default=0, sa_column=Column(Integer(), nullable=False, default=0))


async def count_one(session: AsyncSession, day: date, kind: ErrorKind) -> None:
    """Commits one more of `kind` on `day`: the day's row made if needed, else counted up in place."""
    table = ServerErrorDay.__table__  # type: ignore[attr-defined]
    bind = session.get_bind()
    insert_of = postgresql.insert if bind.dialect.name == "postgresql" else sqlite.insert
    statement = insert_of(table).values(day=day, kind=kind.value, count=1)
    await session.exec(statement.on_conflict_do_update(  # type: ignore[call-overload]
        index_elements=[table.c.day, table.c.kind], set_={"count": table.c.count + 1}))
    await session.commit()


async def by_day(session: AsyncSession, first: date, last: date) -> dict[date, dict[ErrorKind, int]]:
    """Each day from `first` to `last` that had one, with its count of each kind."""
    query = select(ServerErrorDay).where(col(ServerErrorDay.day) >= first, col(ServerErrorDay.day) <= last)
    found: dict[date, dict[ErrorKind, int]] = defaultdict(lambda: defaultdict(int))
    for row in await session.exec(query):
        found[row.day][ErrorKind(row.kind)] += row.count
    return found
