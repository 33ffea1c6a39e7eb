"""Reading the admin's plain arguments, as the command line and the routes both take them.

Each reader returns the value or raises `LedgerError` with a message for the
operator. Its `param` names the field where the reader knows it (a tag, or the
`param` that a caller gives); a route names the field that it read the value from
with `read_field`.
"""
from __future__ import annotations

import re
import uuid
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any, Callable, TypeVar

from ledger.errors import LedgerError

T = TypeVar("T")

_SUFFIXES = {"": 1, "K": 1_000, "M": 1_000_000, "B": 1_000_000_000}
# Far below BigInteger's limit, so sums of Grants and Holds cannot overflow it.
MAX_TOKENS = 10**15
TAG_MAX = 32
_TAG = re.compile(r"[a-z0-9-]{1,32}")
# ISO weekday numbers, as the warm_windows table stores them.
WEEKDAYS = {"mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6, "sun": 7}
_DAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def read_field(reader: Callable[..., T], value: Any, field: str, **options: Any) -> T:
    """`reader(value, **options)`, whose refusal names `field`: the request's field that the value came
    from. The refusal rises to the API's one error mapping, a 400 with `param` `field`."""
    try:
        return reader(value, **options)
    except LedgerError as refusal:
        refusal.param = field
        raise


def tokens(value: str | int, *, least: int) -> int:
    """A number of tokens as the App writes them: 2500000, 2_500_000, 50K, 2.5M (or a JSON number)."""
    if isinstance(value, bool):
        raise LedgerError(f"{value!r} is not a whole number of tokens, such as 50000, 50K or 2.5M.")
    number = Decimal(value) if isinstance(value, int) else _decimal_tokens(value)
    if not number.is_finite() or number != number.to_integral_value():
        raise LedgerError(f"{value!r} is not a whole number of tokens, such as 50000, 50K or 2.5M.")
    if not least <= number <= MAX_TOKENS:
        raise LedgerError(f"Tokens must be from {least} to {MAX_TOKENS}, not {value}.")
    return int(number)


def _decimal_tokens(text: str) -> Decimal:
    raw = text.strip().replace("_", "").replace(",", "").upper()
    number, suffix = (raw[:-1], raw[-1]) if raw[-1:].isalpha() else (raw, "")
    try:
        return Decimal(number) * _SUFFIXES[suffix]
    except (InvalidOperation, KeyError):
        return Decimal("NaN")


def day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise LedgerError(f"{text!r} is not a day: write it as YYYY-MM-DD.") from None


def short_text(text: str, what: str, limit: int = 200, *, param: str | None = None) -> str:
    # The columns hold 200 characters; PostgreSQL would refuse more, SQLite keep it.
    text = text.strip()
    if len(text) > limit:
        raise LedgerError(f"{what} has at most {limit} characters; this one has {len(text)}.", param=param)
    return text


def key_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise LedgerError(f"{text!r} is not a key id: `key list --user ...` shows them.") from None


def work_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise LedgerError(f"{text!r} is not an id of background work (a UUID).") from None


def window_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise LedgerError(f"{text!r} is not a window id: `warm list` shows them.") from None


def tag(text: str) -> str:
    """A tag in its one form, as the App writes what an admin types: `Hiring 2026 08` is `hiring-2026-08`."""
    written = re.sub(r"[\s_]+", "-", text.strip().lower())
    if not _TAG.fullmatch(written):
        raise LedgerError(f"A tag has lowercase letters, digits and dashes, at most {TAG_MAX} characters: "
                          f"{text!r} is not one.", param="tag")
    return written


def weekdays(value: str | list[str | int]) -> list[int]:
    """Days of a weekly window as ISO weekday numbers: `mon-fri`, `sat,sun`, `1,2,3` or a list of those."""
    parts = [str(part) for part in value] if isinstance(value, list) else value.split(",")
    found: set[int] = set()
    for part in (part.strip().lower() for part in parts):
        first, _, last = part.partition("-")
        start, end = _weekday(first, value), _weekday(last or first, value)
        if end < start:
            raise LedgerError(f"{part!r} runs backwards: write a range of days as mon-fri.")
        found.update(range(start, end + 1))
    if not found:
        raise LedgerError("A window needs at least one day.")
    return sorted(found)


def _weekday(text: str, whole: object) -> int:
    if text.isdigit() and 1 <= int(text) <= 7:
        return int(text)
    if len(text) >= 3 and any(name.startswith(text) for name in _DAY_NAMES):
        return WEEKDAYS[text[:3]]
    raise LedgerError(f"{whole!r} is not a list of days: write them as mon-fri, sat,sun or 1,2,3 (Monday is 1).")


def minute_of_day(text: str, what: str) -> int:
    """`09:30` as the minute of its day (0 to 1439); `24:00` is no time of a day."""
    match = re.fullmatch(r"(\d{1,2}):(\d{2})", text.strip())
    if not match or int(match[1]) > 23 or int(match[2]) > 59:
        raise LedgerError(f"{what} {text!r} is not a time of day: write it as HH:MM, from 00:00 to 23:59.")
    return int(match[1]) * 60 + int(match[2])

