"""The limit of the App's sign-in: 5 tries a minute from one client address, per family of routes
(signing in, asking for a link, setting a password). Counted in the ledger, so that it holds across
ingress replicas. A refused try is not counted: the wait ends a minute after the oldest counted try."""
from __future__ import annotations

import enum
import math
from datetime import datetime, timedelta

from sqlalchemy import delete
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.access_models import AccessTry
from ledger.errors import TooManyTries

MAX_TRIES = 5
WINDOW = timedelta(minutes=1)


class Family(str, enum.Enum):
    sign_in = "sign_in"
    links = "links"
    password = "password"


# The spec names the sign-in's words ("Too many tries to sign in."); the others say the same plainly.
MESSAGES = {Family.sign_in: "Too many tries to sign in. Wait {n} seconds.",
            Family.links: "Too many tries. Wait {n} seconds.",
            Family.password: "Too many tries. Wait {n} seconds."}


async def count_try(session: AsyncSession, family: Family, address: str, now: datetime) -> None:
    """Count this try, or raise TooManyTries with the seconds to wait. Commits, so that the try counts
    whatever the request does next."""
    since, address = now - WINDOW, address[:100]
    # Tries older than the window count for nothing: drop them, so the table stays small.
    await session.execute(delete(AccessTry).where(AccessTry.family == family.value, AccessTry.address == address,
                                                  col(AccessTry.at) <= since))
    recent = list(await session.exec(select(AccessTry.at).where(
        AccessTry.family == family.value, AccessTry.address == address, col(AccessTry.at) > since)
        .order_by(col(AccessTry.at))))
    if len(recent) >= MAX_TRIES:
        await session.commit()
        wait_s = max(1, math.ceil((recent[-MAX_TRIES] + WINDOW - now).total_seconds()))
        raise TooManyTries(MESSAGES[family].format(n=wait_s), wait_s)
    session.add(AccessTry(family=family.value, address=address, at=now))
    await session.commit()
