"""The limits of the App's sign-in: 5 tries a minute from one client address, per family of routes
(signing in, asking for a link, setting a password, applying), and 5 a minute against one account.

The address alone would let many addresses try one account without limit; the account alone would let
one address try everyone's. So a try counts against both (an account is the email it names, kept as a
hash), and either at its limit refuses it. Counted in the ledger, so that the limits hold across
ingress replicas. A refused try is not counted: the wait ends a minute after the oldest counted try."""
from __future__ import annotations

import enum
import hashlib
import math
from datetime import datetime, timedelta

from sqlalchemy import delete
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.accounts.tables import AccessTry
from ledger.errors import TooManyTries

MAX_TRIES = 5
WINDOW = timedelta(minutes=1)
ACCOUNT = "account:"  # the prefix of an account's counter; an address never starts so


class Family(str, enum.Enum):
    sign_in = "sign_in"
    links = "links"
    password = "password"
    applications = "applications"


# The spec names the sign-in's words ("Too many tries to sign in."); the others say the same plainly.
MESSAGES = {Family.sign_in: "Too many tries to sign in. Wait {n} seconds.",
            Family.links: "Too many tries. Wait {n} seconds.",
            Family.password: "Too many tries. Wait {n} seconds.",
            Family.applications: "Too many tries. Wait {n} seconds."}


def account_key(email: str) -> str:
    """The counter of the account that an email names, in the email's one form (trimmed, lowercase)."""
    return ACCOUNT + hashlib.sha256(email.strip().lower().encode()).hexdigest()


async def count_try(session: AsyncSession, family: Family, address: str, now: datetime, *,
                    account: str | None = None) -> None:
    """Count this try from `address` and against `account` (an email), or raise TooManyTries with the
    seconds to wait. Commits, so that the try counts whatever the request does next."""
    counters = [address[:100]] + ([account_key(account)] if account is not None else [])
    waits = [await _wait_s(session, family, counter, now) for counter in counters]
    if any(waits):
        await session.commit()
        wait_s = max(waits)
        raise TooManyTries(MESSAGES[family].format(n=wait_s), wait_s)
    for counter in counters:
        session.add(AccessTry(family=family.value, address=counter, at=now))
    await session.commit()


async def _wait_s(session: AsyncSession, family: Family, counter: str, now: datetime) -> int:
    """0 while the counter has tries left this minute, else the seconds until its oldest try ages out."""
    since = now - WINDOW
    # Tries older than the window count for nothing: drop them, so the table stays small.
    await session.execute(delete(AccessTry).where(col(AccessTry.family) == family.value,
                                                  col(AccessTry.address) == counter, col(AccessTry.at) <= since))
    recent = list(await session.exec(select(AccessTry.at).where(
        AccessTry.family == family.value, AccessTry.address == counter, col(AccessTry.at) > since)
        .order_by(col(AccessTry.at))))
    if len(recent) < MAX_TRIES:
        return 0
    return max(1, math.ceil((recent[-MAX_TRIES] + WINDOW - now).total_seconds()))
