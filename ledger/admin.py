"""The operator's commands: users, API keys, tokens, the spend stop, usage, background work.

Their entry is `python -m cluster.admin` (cluster/admin.py): it reads the
settings and hands them down as an `AdminConfig`, as the ledger reads none.

    python -m cluster.admin user create NAME
    python -m cluster.admin user list [--json]
    python -m cluster.admin user show NAME_OR_ID [--json]
    python -m cluster.admin user suspend|restore NAME_OR_ID
    python -m cluster.admin user allowance NAME_OR_ID TOKENS|default
    python -m cluster.admin user harvest-quota NAME_OR_ID N|default
    python -m cluster.admin key create --user NAME_OR_ID --name KEYNAME
    python -m cluster.admin key list --user NAME_OR_ID [--all] [--json]
    python -m cluster.admin key show KEY_ID_OR_KEY [--json]
    python -m cluster.admin key rename KEY_ID NEW_NAME
    python -m cluster.admin key pause|resume|revoke KEY_ID
    python -m cluster.admin grant NAME_OR_ID TOKENS [--key KEY_ID] [--note TEXT]
    python -m cluster.admin budget set NAME_OR_ID TOKENS [--key KEY_ID]
    python -m cluster.admin spend lock [--reason TEXT] [--json]
    python -m cluster.admin spend clear [--json]
    python -m cluster.admin spend show [--json]
    python -m cluster.admin usage NAME_OR_ID [--key KEY_ID] [--from YYYY-MM-DD] [--to YYYY-MM-DD] [--json]
    python -m cluster.admin work list [--user NAME_OR_ID] [--status STATUS] [--limit N] [--json]
    python -m cluster.admin work cancel WORK_ID
    python -m cluster.admin work capacity job N

TOKENS is a whole number such as 2500000, or with a suffix as the App
writes it: 50K, 2.5M. `--json` prints one JSON document for scripts: ids
are strings, times ISO 8601 in UTC, tokens numbers. `key show` takes a key
id or a whole key (to find whose it is); a key is never printed back.
Migrations are applied first.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger import grants, harvests, keys, usage, work
from ledger.coltypes import utcnow
from ledger.db import is_sqlite, make_engine, session_factory
from ledger.errors import LedgerError, NameRefused, NotFound, StatusChangeRefused
from ledger.migrate import upgrade
from ledger.models import ApiKey, KeyStatus, Standing, User, Work, WorkKind, WorkStatus
from ledger.spend import set_spend_stop, spend_stop
from ledger.tokens import DEFAULT_MONTHLY_ALLOWANCE



@dataclass(frozen=True)
class AdminConfig:
    """What the commands take from the settings (cluster/admin.py reads them)."""

    database_url: str
    monthly_allowance: int = DEFAULT_MONTHLY_ALLOWANCE  # of a user without an allowance of its own
    job_result_kept: timedelta = timedelta(days=30)
    # "This month" and "today" of the views, and the time of a cancel: tests hand in a fixed clock.
    clock: Callable[[], datetime] = utcnow


Command = Callable[[AsyncSession, argparse.Namespace, AdminConfig], Awaitable[None]]


async def ensure_local_user_and_key(url: str, user_name: str = "local", key_name: str = "local") -> str | None:
    """For the embedded start: make the local user and a key on first start.

    Returns the raw key when it made one, None when the user existed already.
    """
    keys.validate_key_name(key_name)  # a bad name is a bug, not a race below
    await upgrade(url)
    engine = make_engine(url)
    try:
        async with session_factory(engine)() as session, session.begin():
            if await keys.user_by_name(session, user_name) is not None:
                return None
            user = await keys.create_user(session, user_name)
            _, raw_key = await keys.create_api_key(session, user.id, key_name)
            return raw_key
    except (IntegrityError, NameRefused):
        return None  # a concurrent start made the user first
    finally:
        await engine.dispose()



# Users ------------------------------------------------------------------------
async def user_create(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    user = await keys.create_user(session, args.name)
    print(f"{user.id}\t{user.name}")


async def user_list(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    users = await keys.list_users(session)
    if args.json:
        return _print_json({"users": [_user_json(user, config) for user in users]})
    rows = [_user_row(user) for user in users]
    _print_table(("ID", "NAME", "STANDING", "MONTHLY ALLOWANCE", "CREATED"), rows)


async def user_standing(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    standing = Standing.suspended if args.action == "suspend" else Standing.active
    user = await keys.set_standing(session, await keys.find_user(session, args.user), standing)
    print(f"{user.id}\t{user.name}\t{user.standing.value}")


async def user_allowance(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    tokens = None if args.tokens.strip().lower() == "default" else _tokens(args.tokens, least=0)
    user = await keys.find_user(session, args.user)
    await grants.set_allowance(session, user.id, tokens)
    shown = f"the default, {config.monthly_allowance}" if tokens is None else str(tokens)
    print(f"The monthly allowance of {user.name!r} is {shown} tokens.")


async def user_harvest_quota(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    """The harvests that each key of the user may start in a UTC month (the spec: 200)."""
    text = args.count.strip().lower()
    if text != "default" and not text.isdigit():
        raise LedgerError(f"{args.count!r} is not a number of harvests (0 or more) or `default`.")
    quota = None if text == "default" else int(text)
    user = await keys.find_user(session, args.user)
    await harvests.set_quota(session, user.id, quota)
    shown = f"the default, {harvests.DEFAULT_MONTHLY_QUOTA}," if quota is None else str(quota)
    print(f"Each API key of {user.name!r} may start {shown} {'harvest' if quota == 1 else 'harvests'} "
          "a UTC month.")


async def user_show(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    found = await usage.account(session, await keys.find_user(session, args.user), now=config.clock())
    if found.allowance_is_default:  # usage.account knows only the built-in default
        found = replace(found, allowance=config.monthly_allowance)
    if args.json:
        return _print_json(_account_json(found))
    allowance = f"{found.allowance} tokens a month" + (" (the default)" if found.allowance_is_default else "")
    _print_fields((
        ("User", found.name), ("Id", str(found.user_id)), ("Standing", found.standing.value),
        ("Monthly allowance", allowance),
        ("Used this month", f"{found.allowance_used} of the allowance, running Holds included"),
        ("Allowance left", str(found.allowance_left)),
        ("Budget left", str(found.budget_left)),
        ("Tokens this month", f"{found.tokens_this_month}, every key; {found.running} Holds running"),
    ))
    print()
    _print_key_table(found.keys)


# Tokens -------------------------------------------------------------------------
async def grant_tokens(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    tokens = _tokens(args.tokens, least=1)
    note = _short_text(args.note, "A Grant's note")
    user = await keys.find_user(session, args.user)
    key = await _live_key_of(session, user, args.key) if args.key else None
    where = _budget_name(user, key)
    budget = await grants.grant(session, user.id, tokens, key_id=key.id if key else None, note=note)
    print(f"Granted {tokens} tokens to {where}: {budget.tokens} left.")


async def budget_set(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    tokens = _tokens(args.tokens, least=0)
    user = await keys.find_user(session, args.user)
    key = await _live_key_of(session, user, args.key) if args.key else None
    where = _budget_name(user, key)
    budget = await grants.set_budget(session, user.id, tokens, key_id=key.id if key else None)
    print(f"Set {where} to {budget.tokens} tokens.")


# Keys ---------------------------------------------------------------------------
async def key_create(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    user = await keys.find_user(session, args.user)
    key, raw_key = await keys.create_api_key(session, user.id, args.name)
    print(f"Key {key.id} ({key.name!r}) of {user.name!r}. It is shown only now:", file=sys.stderr)
    print(raw_key)


async def key_list(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    user = await keys.find_user(session, args.user)
    user_id, name = user.id, user.name
    lines = await usage.key_lines(session, user_id, include_revoked=args.all, now=config.clock())
    if args.json:
        return _print_json({"user": {"id": str(user_id), "name": name}, "keys": [_key_json(line) for line in lines]})
    _print_key_table(lines)


async def key_show(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    """One key and its user, found by its id or by the whole key (never printed back)."""
    key = await _key_by_id_or_raw(session, args.key)
    user = await session.get(User, key.user_id)
    owner = {"id": str(user.id), "name": user.name, "standing": user.standing.value}
    lines = await usage.key_lines(session, key.user_id, include_revoked=True, now=config.clock())
    line = next(line for line in lines if line.key.id == key.id)
    if args.json:
        return _print_json({"key": _key_json(line), "user": owner})
    budget = "-" if line.budget_left is None else str(line.budget_left)
    _print_fields((
        ("Key", line.key.name), ("Id", str(line.key.id)), ("Prefix", f"{line.key.prefix}..."),
        ("Status", line.key.status.value), ("User", owner["name"]), ("User id", owner["id"]),
        ("User standing", owner["standing"]), ("Tokens this month", str(line.tokens_this_month)),
        ("Budget left", budget), ("Created", _when(line.key.created_at)), ("Last used", _when(line.key.last_used_at)),
    ))


async def key_rename(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    key = await keys.rename_key(session, _key_id(args.key_id), args.name)
    print(f"{key.id}\t{key.name}\t{key.status.value}")


async def key_status(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    status = {"pause": KeyStatus.paused, "resume": KeyStatus.active, "revoke": KeyStatus.revoked}
    key = await keys.set_key_status(session, _key_id(args.key_id), status[args.action])
    print(f"{key.id}\t{key.name}\t{key.status.value}")


# The spend stop -------------------------------------------------------------------
async def spend_lock(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    await set_spend_stop(session, True, _short_text(args.reason, "The reason"))
    await spend_show(session, args, config)


async def spend_clear(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    await set_spend_stop(session, False)
    await spend_show(session, args, config)


async def spend_show(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    stop = await spend_stop(session)
    if args.json:
        return _print_json({"locked": stop.locked, "reason": stop.reason or None, "changed_at": _iso(stop.changed_at)})
    state = "locked: new GPU work is refused" if stop.locked else "clear"
    _print_table(("SPEND STOP", "REASON", "CHANGED"), [(state, stop.reason or "-", _when(stop.changed_at))])


# Background work ---------------------------------------------------------------------
async def work_list(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    user_id = (await keys.find_user(session, args.user)).id if args.user else None
    status = WorkStatus(args.status) if args.status else None
    rows = await work.listing(session, user_id=user_id, status=status, limit=args.limit)
    # A harvest's progress: how many of its prompts its GPU run has read.
    progress = await harvests.progress(session, [row.id for row in rows])
    if args.json:
        return _print_json({"work": [_work_json(row, progress.get(row.id)) for row in rows]})
    header = ("ID", "KIND", "MODEL", "STATUS", "ATTEMPTS", "CREATED", "STARTED", "FINISHED", "RESULT", "PROGRESS")
    _print_table(header, [(str(row.id), row.kind.value, row.model, row.status.value, str(row.attempts),
                           _when(row.created_at), _when(row.started_at), _when(row.finished_at),
                           "-" if row.result_status is None else str(row.result_status),
                           _progress(progress.get(row.id))) for row in rows])


def _progress(found: tuple[int, int] | None) -> str:
    return "-" if found is None else f"prompts={found[0]}/{found[1]}"


async def work_cancel(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    """As the User's own cancel: a running request stops and pays its whole Hold; a harvest
    pays it only when its GPU run started."""
    row = await session.get(Work, _work_id(args.work_id))
    if row is None:
        raise NotFound(f"No background work has the id {args.work_id}.")
    work_id, user_id, kind = row.id, row.user_id, row.kind
    await session.rollback()
    if kind == WorkKind.harvest:
        row, _ = await harvests.cancel(session, work_id, user_id, config.clock())
    else:
        row = await work.cancel(session, work_id, user_id, kind, config.clock(), config.job_result_kept)
    print(f"{row.id}\t{row.status.value}")


async def work_capacity(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    if args.count < 0:
        raise LedgerError("The number of rows that run at once is 0 or more.")
    await work.set_max_running(session, WorkKind(args.kind), args.count)
    print(f"{args.kind}\tat most {args.count} at once")


def _work_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise LedgerError(f"{text!r} is not an id of background work (a UUID).") from None


# Usage ----------------------------------------------------------------------------
async def usage_show(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    month_start, today = usage.this_month_so_far(config.clock())
    first = _day(args.first) if args.first else month_start
    last = _day(args.last) if args.last else today
    user = await keys.find_user(session, args.user)
    key = await _key_of(session, user, args.key) if args.key else None
    key_id, title = (key.id, f"{user.name!r}, key {key.name!r}") if key else (None, repr(user.name))
    whose = {"user": {"id": str(user.id), "name": user.name},
             "key": {"id": str(key.id), "name": key.name} if key else None}
    days = await usage.daily_usage(session, user.id, first, last, key_id)
    running = await usage.running_holds(session, user.id, key_id)
    if args.json:
        return _print_json({**whose, "from": first.isoformat(), "to": last.isoformat(),
                            "days": [{"day": d.day.isoformat(), **_day_counts([d])} for d in days],
                            "total": _day_counts(days), "running_holds": [_hold_json(h) for h in running]})
    print(f"Usage of {title}, UTC days {first} to {last}: settled Completions")
    _print_days(days)
    print()
    print("Running Holds")
    rows = [(_when(h.started), str(h.hold_id), h.key_name or "-", h.model, h.source.value, str(h.tokens))
            for h in running]
    _print_table(("STARTED", "HOLD", "KEY", "MODEL", "SOURCE", "TOKENS HELD"), rows)


_DAY_COUNTS = ("completions", "tokens", "completed", "failed", "stopped")


def _day_counts(days: Sequence[usage.DayUsage]) -> dict[str, int]:
    return {name: sum(getattr(d, name) for d in days) for name in _DAY_COUNTS}


def _print_days(days: Sequence[usage.DayUsage]) -> None:
    rows = [(d.day.isoformat(), *(str(getattr(d, name)) for name in _DAY_COUNTS)) for d in days]
    totals = ("TOTAL", *(str(sum(getattr(d, name) for d in days)) for name in _DAY_COUNTS))
    _print_table(("DAY", *(name.upper() for name in _DAY_COUNTS)), [*rows, totals])


# Looking things up ------------------------------------------------------------------
async def _key_of(session: AsyncSession, user: User, text: str) -> ApiKey:
    key = await session.get(ApiKey, _key_id(text))
    if key is None or key.user_id != user.id:
        raise NotFound(f"{user.name!r} has no API key with the id {text}.")
    return key


async def _live_key_of(session: AsyncSession, user: User, text: str) -> ApiKey:
    key = await _key_of(session, user, text)
    if key.status == KeyStatus.revoked:
        raise StatusChangeRefused(f"The key {key.name!r} is revoked: it can spend nothing.")
    return key


async def _key_by_id_or_raw(session: AsyncSession, text: str) -> ApiKey:
    """A key by its id, or by a whole key hashed as the key check hashes it."""
    text = text.strip()
    if text.startswith((keys.KEY_PREFIX, keys.LEGACY_KEY_PREFIX)):
        query = select(ApiKey).where(ApiKey.key_hash == keys.hash_key(text))
        key = (await session.exec(query)).first()
        if key is None:  # the text may be a real secret: it is not repeated
            raise NotFound("No API key matches the key given.")
        return key
    try:
        key_id = uuid.UUID(text)
    except ValueError:  # perhaps a key cut short: not repeated either
        raise LedgerError("Give a key id (a UUID: `key list --user ...` shows them) or a whole key "
                          f"({keys.KEY_PREFIX}... or {keys.LEGACY_KEY_PREFIX}...).") from None
    key = await session.get(ApiKey, key_id)
    if key is None:
        raise NotFound(f"No API key has the id {key_id}.")
    return key


def _key_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise LedgerError(f"{text!r} is not a key id: `key list --user ...` shows them.") from None


# Reading arguments ------------------------------------------------------------------
_SUFFIXES = {"": 1, "K": 1_000, "M": 1_000_000, "B": 1_000_000_000}
# Far below BigInteger's limit, so sums of Grants and Holds cannot overflow it.
MAX_TOKENS = 10**15


def _tokens(text: str, *, least: int) -> int:
    """A number of tokens as the App writes them: 2500000, 2_500_000, 50K, 2.5M."""
    raw = text.strip().replace("_", "").replace(",", "").upper()
    number, suffix = (raw[:-1], raw[-1]) if raw[-1:].isalpha() else (raw, "")
    try:
        value = Decimal(number) * _SUFFIXES[suffix]
    except (InvalidOperation, KeyError):
        value = Decimal("NaN")
    if not value.is_finite() or value != value.to_integral_value():
        raise LedgerError(f"{text!r} is not a whole number of tokens, such as 50000, 50K or 2.5M.")
    if not least <= value <= MAX_TOKENS:
        raise LedgerError(f"Tokens must be from {least} to {MAX_TOKENS}, not {text}.")
    return int(value)


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise LedgerError(f"{text!r} is not a day: write it as YYYY-MM-DD.") from None


def _short_text(text: str, what: str, limit: int = 200) -> str:
    # Both columns hold 200 characters; PostgreSQL would refuse more, SQLite keep it.
    text = text.strip()
    if len(text) > limit:
        raise LedgerError(f"{what} has at most {limit} characters; this one has {len(text)}.")
    return text


# Output -----------------------------------------------------------------------
def _user_row(user: User) -> tuple[str, ...]:
    allowance = "default" if user.monthly_allowance is None else str(user.monthly_allowance)
    return (str(user.id), user.name, user.standing.value, allowance, _when(user.created_at))


def _print_key_table(lines: Sequence[usage.KeyLine]) -> None:
    header = ("ID", "NAME", "KEY", "STATUS", "TOKENS THIS MONTH", "BUDGET LEFT", "CREATED", "LAST USED")
    _print_table(header, [_key_row(line) for line in lines])


def _key_row(line: usage.KeyLine) -> tuple[str, ...]:
    key = line.key
    budget = "-" if line.budget_left is None else str(line.budget_left)
    return (str(key.id), key.name, f"{key.prefix}...", key.status.value, str(line.tokens_this_month), budget,
            _when(key.created_at), _when(key.last_used_at))


def _budget_name(user: User, key: ApiKey | None) -> str:
    if key is None:
        return f"the Budget of {user.name!r}"
    return f"the own Budget of the key {key.name!r} of {user.name!r}"


def _when(moment: datetime | None) -> str:
    return "-" if moment is None else moment.strftime("%Y-%m-%d %H:%M UTC")


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(timezone.utc).isoformat()


def _print_json(document: Any) -> None:
    print(json.dumps(document, indent=2))


def _user_json(user: User, config: AdminConfig) -> dict[str, Any]:
    own = user.monthly_allowance
    return {"id": str(user.id), "name": user.name, "standing": user.standing.value,
            "monthly_allowance": config.monthly_allowance if own is None else own,
            "allowance_is_default": own is None, "created_at": _iso(user.created_at)}


def _account_json(found: usage.Account) -> dict[str, Any]:
    return {"id": str(found.user_id), "name": found.name, "standing": found.standing.value,
            "monthly_allowance": found.allowance, "allowance_is_default": found.allowance_is_default,
            "allowance_used": found.allowance_used, "allowance_left": found.allowance_left,
            "budget_left": found.budget_left, "tokens_this_month": found.tokens_this_month,
            "running_holds": found.running, "keys": [_key_json(line) for line in found.keys]}


def _key_json(line: usage.KeyLine) -> dict[str, Any]:
    key = line.key
    return {"id": str(key.id), "user_id": str(key.user_id), "name": key.name, "prefix": key.prefix,
            "status": key.status.value, "tokens_this_month": line.tokens_this_month,
            "budget_left": line.budget_left, "created_at": _iso(key.created_at),
            "last_used_at": _iso(key.last_used_at)}


def _hold_json(held: usage.RunningHold) -> dict[str, Any]:
    return {"id": str(held.hold_id), "started_at": _iso(held.started), "key_name": held.key_name,
            "model": held.model, "source": held.source.value, "tokens": held.tokens}


def _work_json(row: Work, progress: tuple[int, int] | None = None) -> dict[str, Any]:
    return {"id": str(row.id), "kind": row.kind.value, "user_id": str(row.user_id), "key_id": str(row.key_id),
            "model": row.model, "status": row.status.value, "attempts": row.attempts,
            "created_at": _iso(row.created_at), "started_at": _iso(row.started_at),
            "finished_at": _iso(row.finished_at), "result_status": row.result_status,
            "progress": None if progress is None else {"prompts_done": progress[0], "n_prompts": progress[1]}}


def _print_fields(pairs: Sequence[tuple[str, str]]) -> None:
    width = max(len(label) for label, _ in pairs)
    for label, value in pairs:
        print(f"{label.ljust(width)}  {value}")


def _print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())


# Parsing and running --------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m cluster.admin", description=__doc__.split("\n")[0])
    parser.set_defaults(json=False)
    nouns = parser.add_subparsers(dest="noun", required=True)
    _add_user_commands(_verbs(nouns, "user", "users"))
    _add_key_commands(_verbs(nouns, "key", "API keys"))
    _add_token_commands(nouns)
    _add_spend_commands(_verbs(nouns, "spend", "the spend stop: while locked, no new GPU work starts"))
    _add_usage_command(nouns)
    _add_work_commands(_verbs(nouns, "work", "background work: Jobs and harvests"))
    return parser


def _add_work_commands(verbs: argparse._SubParsersAction) -> None:
    listing = verbs.add_parser("list", help="the newest rows of the Runner's queues")
    listing.add_argument("--user", metavar="NAME_OR_ID")
    listing.add_argument("--status", choices=[status.value for status in WorkStatus])
    listing.add_argument("--limit", type=int, default=50)
    _json_flag(listing).set_defaults(run=work_list)
    cancel = verbs.add_parser("cancel", help="cancel queued or running work")
    cancel.add_argument("work_id", metavar="WORK_ID")
    cancel.set_defaults(run=work_cancel)
    capacity = verbs.add_parser("capacity", help="how many rows of a kind run at once (the spec: 4 Jobs)")
    capacity.add_argument("kind", choices=[kind.value for kind in WorkKind])
    capacity.add_argument("count", type=int)
    capacity.set_defaults(run=work_capacity)


def _json_flag(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--json", action="store_true", help="print one JSON document, for scripts")
    return parser


def _verbs(nouns: argparse._SubParsersAction, noun: str, about: str) -> argparse._SubParsersAction:
    return nouns.add_parser(noun, help=about).add_subparsers(dest="verb", required=True)


def _add_user_commands(verbs: argparse._SubParsersAction) -> None:
    create = verbs.add_parser("create", help="make a user")
    create.add_argument("name")
    create.set_defaults(run=user_create)
    _json_flag(verbs.add_parser("list", help="list the users")).set_defaults(run=user_list)
    show = verbs.add_parser("show", help="a user's standing, tokens and keys")
    show.add_argument("user", metavar="NAME_OR_ID")
    _json_flag(show).set_defaults(run=user_show)
    for action in ("suspend", "restore"):
        standing = verbs.add_parser(action, help=f"{action} a user's access")
        standing.add_argument("user", metavar="NAME_OR_ID")
        standing.set_defaults(run=user_standing, action=action)
    allowance = verbs.add_parser("allowance", help="set a user's monthly allowance, or `default`")
    allowance.add_argument("user", metavar="NAME_OR_ID")
    allowance.add_argument("tokens", metavar="TOKENS|default")
    allowance.set_defaults(run=user_allowance)
    quota = verbs.add_parser("harvest-quota", help="set how many harvests each key of a user may start "
                                                   "in a UTC month, or `default` (200)")
    quota.add_argument("user", metavar="NAME_OR_ID")
    quota.add_argument("count", metavar="N|default")
    quota.set_defaults(run=user_harvest_quota)


def _add_key_commands(verbs: argparse._SubParsersAction) -> None:
    create = verbs.add_parser("create", help="make a key and print it once")
    create.add_argument("--user", required=True, metavar="NAME_OR_ID")
    create.add_argument("--name", required=True, metavar="KEYNAME")
    create.set_defaults(run=key_create)
    listing = verbs.add_parser("list", help="list a user's keys")
    listing.add_argument("--user", required=True, metavar="NAME_OR_ID")
    listing.add_argument("--all", action="store_true", help="revoked keys too")
    _json_flag(listing).set_defaults(run=key_list)
    show = verbs.add_parser("show", help="a key and its user, by the key's id or the whole key")
    show.add_argument("key", metavar="KEY_ID_OR_KEY")
    _json_flag(show).set_defaults(run=key_show)
    rename = verbs.add_parser("rename", help="rename a key that is not revoked")
    rename.add_argument("key_id", metavar="KEY_ID")
    rename.add_argument("name", metavar="NEW_NAME")
    rename.set_defaults(run=key_rename)
    for action in ("pause", "resume", "revoke"):
        change = verbs.add_parser(action, help=f"{action} a key")
        change.add_argument("key_id", metavar="KEY_ID")
        change.set_defaults(run=key_status, action=action)


def _add_token_commands(nouns: argparse._SubParsersAction) -> None:
    grant = nouns.add_parser("grant", help="add tokens to a user's Budget, or to one key's own Budget")
    grant.add_argument("user", metavar="NAME_OR_ID")
    grant.add_argument("tokens", metavar="TOKENS")
    grant.add_argument("--key", metavar="KEY_ID", help="give this key its own Budget, or add to it")
    grant.add_argument("--note", default="", metavar="TEXT")
    grant.set_defaults(run=grant_tokens)
    setting = _verbs(nouns, "budget", "Budgets").add_parser("set", help="set a Budget to a number")
    setting.add_argument("user", metavar="NAME_OR_ID")
    setting.add_argument("tokens", metavar="TOKENS")
    setting.add_argument("--key", metavar="KEY_ID", help="the key's own Budget")
    setting.set_defaults(run=budget_set)


def _add_spend_commands(verbs: argparse._SubParsersAction) -> None:
    lock = verbs.add_parser("lock", help="pause new GPU work")
    lock.add_argument("--reason", default="", metavar="TEXT")
    _json_flag(lock).set_defaults(run=spend_lock)
    _json_flag(verbs.add_parser("clear", help="let new GPU work start again")).set_defaults(run=spend_clear)
    _json_flag(verbs.add_parser("show", help="whether new GPU work is paused")).set_defaults(run=spend_show)


def _add_usage_command(nouns: argparse._SubParsersAction) -> None:
    report = nouns.add_parser("usage", help="settled tokens per UTC day, and the running Holds")
    report.add_argument("user", metavar="NAME_OR_ID")
    report.add_argument("--key", metavar="KEY_ID", help="one key alone")
    report.add_argument("--from", dest="first", metavar="YYYY-MM-DD",
                        help="first day; this month's first by default")
    report.add_argument("--to", dest="last", metavar="YYYY-MM-DD", help="last day; today by default")
    _json_flag(report).set_defaults(run=usage_show)


async def run(config: AdminConfig, command: Command, args: argparse.Namespace) -> None:
    url = config.database_url
    await upgrade(url)
    engine = make_engine(url)
    # Commands change money: on SQLite they take the write lock at BEGIN, as the Hold path does.
    writer = engine.execution_options(sqlite_begin="IMMEDIATE") if is_sqlite(url) else engine
    try:
        # No session.begin() block: the ledger's money functions commit themselves.
        async with session_factory(writer)() as session:
            await command(session, args, config)
            await session.commit()
    finally:
        await engine.dispose()


def main(argv: Sequence[str] | None, config: AdminConfig) -> int:
    """Run one command line on the ledger of `config`; 1 with a message on stderr when refused."""
    args = build_parser().parse_args(argv)
    try:
        asyncio.run(run(config, args.run, args))
    except LedgerError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit("The admin command line is `python -m cluster.admin ...`: it reads the settings.")
