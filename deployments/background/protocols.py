"""What the Runner needs from the layers above it, declared here so that it imports none of them.

The process's `TokenLedger` (domain/budget.py) is built by the composition root and handed in;
the Runner names only the part of it that it uses, and pyright checks that the ledger has it.
"""
from __future__ import annotations

from typing import Protocol

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.tokens.leases import HoldLeases


class Settlement(Protocol):
    """The ledger side of a process that settles background work: who it is in the ledger (its
    work leases and its Holds carry `owner`), the leases that keep its Holds alive, and the spend
    stop, during which it claims no new work."""

    @property
    def owner(self) -> str: ...

    @property
    def sessions(self) -> async_sessionmaker[AsyncSession]: ...  # reads

    @property
    def write_sessions(self) -> async_sessionmaker[AsyncSession]: ...  # writes that lock what they touch

    @property
    def leases(self) -> HoldLeases: ...

    async def spend_stopped(self) -> bool: ...
