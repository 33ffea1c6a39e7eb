"""The warn amounts of the GPU spend: a mail to the team when the spend that the pause counts
crosses one (spec: "Watch the spend": the top shows "the amounts that warn the team").

A warn amount mails once per crossing, not on every minute's count above it: a row per amount
says that the spend is past it and was mailed. When the count falls below the amount again (the
24 hours moved on, or an admin's Clear started the count afresh), the row goes, and the next
crossing mails again. The mail is queued in the outbox in the transaction that writes the row,
so a crash keeps both or neither, and the Runner sends what did not go out.
"""
from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import ClassVar

from sqlalchemy import BigInteger, Column, Float, delete
from sqlmodel import Field, SQLModel, col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.accounts.access_mail import SIGN_OFF, app_url
from ledger.accounts.mail import queue_mail
from ledger.accounts.team_mail import TeamMail
from ledger.store.coltypes import UtcDateTime

SPEND_TAB = "/admin?tab=analytics&view=spend"


class SpendWarning(SQLModel, table=True):
    """A warn amount that the spend is past, mailed when it crossed."""

    __tablename__: ClassVar[str] = "spend_warnings"

    # In cents: a float key would not compare equal to the same amount read back.
    amount_cents: int = Field(sa_column=Column(BigInteger(), primary_key=True, autoincrement=False))
    crossed_at: datetime = Field(sa_column=Column(UtcDateTime(), nullable=False))
    spend_usd: float = Field(sa_column=Column(Float(), nullable=False))  # the count that crossed it


def cents(usd: float) -> int:
    return round(usd * 100)


def warn_words(amount_usd: float, counted_usd: float, pause_usd: float, base: str) -> tuple[str, str]:
    subject = f"GPU spend passed ${amount_usd:,.2f} in 24 hours"
    return subject, (
        f"The GPUs cost ${counted_usd:,.2f} since the last Clear within 24 hours, past the warn amount of "
        f"${amount_usd:,.2f}. New GPU work pauses at ${pause_usd:,.2f}.\n\n"
        "The API estimates the spend from Inference's count of its containers each minute. It is not "
        f"Modal's bill.\n\nWatch the spend on Admin, Analytics, Spend:\n{app_url(base, SPEND_TAB)}" + SIGN_OFF)


async def warn_past(session: AsyncSession, amounts: Iterable[float], counted_usd: float, pause_usd: float,
                    team: TeamMail | None, now: datetime) -> list[float]:
    """Record the warn amounts that `counted_usd` crossed since the last call, queue one mail to the
    team for each (none without a team address), and forget the amounts it is below again; commits.
    Returns the amounts crossed now."""
    wanted = sorted({cents(amount) for amount in amounts if amount > 0})
    below = [amount for amount in wanted if counted_usd * 100 < amount]
    if below:
        await session.exec(delete(SpendWarning).where(col(SpendWarning.amount_cents).in_(below)))
    past = [amount for amount in wanted if amount not in below]
    known = set((await session.exec(select(SpendWarning.amount_cents)
                                     .where(col(SpendWarning.amount_cents).in_(past)))).all()) if past else set()
    crossed = [amount for amount in past if amount not in known]
    for amount in crossed:
        session.add(SpendWarning(amount_cents=amount, crossed_at=now, spend_usd=counted_usd))
        if team is not None:
            queue_mail(session, team.to, *warn_words(amount / 100, counted_usd, pause_usd, team.base), now)
    await session.commit()
    return [amount / 100 for amount in crossed]
