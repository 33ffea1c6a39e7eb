"""The operator's command line: users, API keys, tokens, the spend stop, usage.

    python -m ledger.admin user create NAME
    python -m ledger.admin user list
    python -m ledger.admin user show NAME_OR_ID
    python -m ledger.admin user suspend|restore NAME_OR_ID
    python -m ledger.admin user allowance NAME_OR_ID TOKENS|default
    python -m ledger.admin key create --user NAME_OR_ID --name KEYNAME
    python -m ledger.admin key list --user NAME_OR_ID [--all]
    python -m ledger.admin key rename KEY_ID NEW_NAME
    python -m ledger.admin key pause|resume|revoke KEY_ID
    python -m ledger.admin grant NAME_OR_ID TOKENS [--key KEY_ID] [--note TEXT]
    python -m ledger.admin budget set NAME_OR_ID TOKENS [--key KEY_ID]
    python -m ledger.admin spend lock [--reason TEXT]
    python -m ledger.admin spend clear
    python -m ledger.admin spend show
    python -m ledger.admin usage NAME_OR_ID [--key KEY_ID] [--from YYYY-MM-DD] [--to YYYY-MM-DD]
    python -m ledger.admin work list [--user NAME_OR_ID] [--status STATUS] [--limit N]
    python -m ledger.admin work cancel WORK_ID
    python -m ledger.admin work capacity job N

TOKENS is a whole number such as 2500000, or with a suffix as the App
writes it: 50K, 2.5M. It works on the database of ACS_DATABASE_URL and
applies migrations first.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import date, datetime
from decimal import Decimal, InvalidOperation

from sqlalchemy.exc import IntegrityError
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger import grants, keys, usage, work
from ledger.coltypes import utcnow
from ledger.db import database_url_from_env, is_sqlite, make_engine, session_factory
from ledger.errors import LedgerError, NameRefused, NotFound, StatusChangeRefused
from ledger.migrate import upgrade
from ledger.models import ApiKey, KeyStatus, Standing, User, Work, WorkKind, WorkStatus
from ledger.spend import set_spend_stop, spend_stop
from ledger.tokens import DEFAULT_MONTHLY_ALLOWANCE

Command = Callable[[AsyncSession, argparse.Namespace], Awaitable[None]]


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
async def user_create(session: AsyncSession, args: argparse.Namespace) -> None:
    user = await keys.create_user(session, args.name)
    print(f"{user.id}\t{user.name}")


async def user_list(session: AsyncSession, args: argparse.Namespace) -> None:
    rows = [_user_row(user) for user in await keys.list_users(session)]
    _print_table(("ID", "NAME", "STANDING", "MONTHLY ALLOWANCE", "CREATED"), rows)


async def user_standing(session: AsyncSession, args: argparse.Namespace) -> None:
    standing = Standing.suspended if args.action == "suspend" else Standing.active
    user = await keys.set_standing(session, await keys.find_user(session, args.user), standing)
    print(f"{user.id}\t{user.name}\t{user.standing.value}")


async def user_allowance(session: AsyncSession, args: argparse.Namespace) -> None:
    tokens = None if args.tokens.strip().lower() == "default" else _tokens(args.tokens, least=0)
    user = await keys.find_user(session, args.user)
    await grants.set_allowance(session, user.id, tokens)
    shown = f"the default, {DEFAULT_MONTHLY_ALLOWANCE}" if tokens is None else str(tokens)
    print(f"The monthly allowance of {user.name!r} is {shown} tokens.")


async def user_show(session: AsyncSession, args: argparse.Namespace) -> None:
    found = await usage.account(session, await keys.find_user(session, args.user))
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
async def grant_tokens(session: AsyncSession, args: argparse.Namespace) -> None:
    tokens = _tokens(args.tokens, least=1)
    note = _short_text(args.note, "A Grant's note")
    user = await keys.find_user(session, args.user)
    key = await _live_key_of(session, user, args.key) if args.key else None
    where = _budget_name(user, key)
    budget = await grants.grant(session, user.id, tokens, key_id=key.id if key else None, note=note)
    print(f"Granted {tokens} tokens to {where}: {budget.tokens} left.")


async def budget_set(session: AsyncSession, args: argparse.Namespace) -> None:
    tokens = _tokens(args.tokens, least=0)
    user = await keys.find_user(session, args.user)
    key = await _live_key_of(session, user, args.key) if args.key else None
    where = _budget_name(user, key)
    budget = await grants.set_budget(session, user.id, tokens, key_id=key.id if key else None)
    print(f"Set {where} to {budget.tokens} tokens.")


# Keys ---------------------------------------------------------------------------
async def key_create(session: AsyncSession, args: argparse.Namespace) -> None:
    user = await keys.find_user(session, args.user)
    key, raw_key = await keys.create_api_key(session, user.id, args.name)
    print(f"Key {key.id} ({key.name!r}) of {user.name!r}. It is shown only now:", file=sys.stderr)
    print(raw_key)


async def key_list(session: AsyncSession, args: argparse.Namespace) -> None:
    user = await keys.find_user(session, args.user)
    _print_key_table(await usage.key_lines(session, user.id, include_revoked=args.all))


async def key_rename(session: AsyncSession, args: argparse.Namespace) -> None:
    key = await keys.rename_key(session, _key_id(args.key_id), args.name)
    print(f"{key.id}\t{key.name}\t{key.status.value}")


async def key_status(session: AsyncSession, args: argparse.Namespace) -> None:
    status = {"pause": KeyStatus.paused, "resume": KeyStatus.active, "revoke": KeyStatus.revoked}
    key = await keys.set_key_status(session, _key_id(args.key_id), status[args.action])
    print(f"{key.id}\t{key.name}\t{key.status.value}")


# The spend stop -------------------------------------------------------------------
async def spend_lock(session: AsyncSession, args: argparse.Namespace) -> None:
    await set_spend_stop(session, True, _short_text(args.reason, "The reason"))
    await spend_show(session, args)


async def spend_clear(session: AsyncSession, args: argparse.Namespace) -> None:
    await set_spend_stop(session, False)
    await spend_show(session, args)


async def spend_show(session: AsyncSession, args: argparse.Namespace) -> None:
    stop = await spend_stop(session)
    state = "locked: new GPU work is refused" if stop.locked else "clear"
    _print_table(("SPEND STOP", "REASON", "CHANGED"), [(state, stop.reason or "-", _when(stop.changed_at))])


# Background work ---------------------------------------------------------------------
async def work_list(session: AsyncSession, args: argparse.Namespace) -> None:
    user_id = (await keys.find_user(session, args.user)).id if args.user else None
    status = WorkStatus(args.status) if args.status else None
    rows = await work.listing(session, user_id=user_id, status=status, limit=args.limit)
    header = ("ID", "KIND", "MODEL", "STATUS", "ATTEMPTS", "CREATED", "STARTED", "FINISHED", "RESULT")
    _print_table(header, [(str(row.id), row.kind.value, row.model, row.status.value, str(row.attempts),
                           _when(row.created_at), _when(row.started_at), _when(row.finished_at),
                           "-" if row.result_status is None else str(row.result_status)) for row in rows])


async def work_cancel(session: AsyncSession, args: argparse.Namespace) -> None:
    """As the User's own cancel: a running request stops and pays its whole Hold."""
    from datetime import timedelta

    from api.settings import get_settings

    row = await session.get(Work, _work_id(args.work_id))
    if row is None:
        raise NotFound(f"No background work has the id {args.work_id}.")
    kept_for = timedelta(seconds=get_settings().job_result_kept_s)
    work_id, user_id, kind = row.id, row.user_id, row.kind
    await session.rollback()
    row = await work.cancel(session, work_id, user_id, kind, utcnow(), kept_for)
    print(f"{row.id}\t{row.status.value}")


async def work_capacity(session: AsyncSession, args: argparse.Namespace) -> None:
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
async def usage_show(session: AsyncSession, args: argparse.Namespace) -> None:
    month_start, today = usage.this_month_so_far()
    first = _day(args.first) if args.first else month_start
    last = _day(args.last) if args.last else today
    user = await keys.find_user(session, args.user)
    key = await _key_of(session, user, args.key) if args.key else None
    key_id, title = (key.id, f"{user.name!r}, key {key.name!r}") if key else (None, repr(user.name))
    days = await usage.daily_usage(session, user.id, first, last, key_id)
    running = await usage.running_holds(session, user.id, key_id)
    print(f"Usage of {title}, UTC days {first} to {last}: settled Completions")
    _print_days(days)
    print()
    print("Running Holds")
    rows = [(_when(h.started), str(h.hold_id), h.key_name or "-", h.model, h.source.value, str(h.tokens))
            for h in running]
    _print_table(("STARTED", "HOLD", "KEY", "MODEL", "SOURCE", "TOKENS HELD"), rows)


_DAY_COUNTS = ("completions", "tokens", "completed", "failed", "stopped")


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
    parser = argparse.ArgumentParser(prog="python -m ledger.admin", description=__doc__.split("\n")[0])
    nouns = parser.add_subparsers(dest="noun", required=True)
    _add_user_commands(_verbs(nouns, "user", "users"))
    _add_key_commands(_verbs(nouns, "key", "API keys"))
    _add_token_commands(nouns)
    _add_spend_commands(_verbs(nouns, "spend", "the spend stop: while locked, no new GPU work starts"))
    _add_usage_command(nouns)
    _add_work_commands(_verbs(nouns, "work", "background work: Jobs"))
    return parser


def _add_work_commands(verbs: argparse._SubParsersAction) -> None:
    listing = verbs.add_parser("list", help="the newest rows of the Runner's queues")
    listing.add_argument("--user", metavar="NAME_OR_ID")
    listing.add_argument("--status", choices=[status.value for status in WorkStatus])
    listing.add_argument("--limit", type=int, default=50)
    listing.set_defaults(run=work_list)
    cancel = verbs.add_parser("cancel", help="cancel queued or running work")
    cancel.add_argument("work_id", metavar="WORK_ID")
    cancel.set_defaults(run=work_cancel)
    capacity = verbs.add_parser("capacity", help="how many rows of a kind run at once (the spec: 4 Jobs)")
    capacity.add_argument("kind", choices=[kind.value for kind in WorkKind])
    capacity.add_argument("count", type=int)
    capacity.set_defaults(run=work_capacity)


def _verbs(nouns: argparse._SubParsersAction, noun: str, about: str) -> argparse._SubParsersAction:
    return nouns.add_parser(noun, help=about).add_subparsers(dest="verb", required=True)


def _add_user_commands(verbs: argparse._SubParsersAction) -> None:
    create = verbs.add_parser("create", help="make a user")
    create.add_argument("name")
    create.set_defaults(run=user_create)
    verbs.add_parser("list", help="list the users").set_defaults(run=user_list)
    show = verbs.add_parser("show", help="a user's standing, tokens and keys")
    show.add_argument("user", metavar="NAME_OR_ID")
    show.set_defaults(run=user_show)
    for action in ("suspend", "restore"):
        standing = verbs.add_parser(action, help=f"{action} a user's access")
        standing.add_argument("user", metavar="NAME_OR_ID")
        standing.set_defaults(run=user_standing, action=action)
    allowance = verbs.add_parser("allowance", help="set a user's monthly allowance, or `default`")
    allowance.add_argument("user", metavar="NAME_OR_ID")
    allowance.add_argument("tokens", metavar="TOKENS|default")
    allowance.set_defaults(run=user_allowance)


def _add_key_commands(verbs: argparse._SubParsersAction) -> None:
    create = verbs.add_parser("create", help="make a key and print it once")
    create.add_argument("--user", required=True, metavar="NAME_OR_ID")
    create.add_argument("--name", required=True, metavar="KEYNAME")
    create.set_defaults(run=key_create)
    listing = verbs.add_parser("list", help="list a user's keys")
    listing.add_argument("--user", required=True, metavar="NAME_OR_ID")
    listing.add_argument("--all", action="store_true", help="revoked keys too")
    listing.set_defaults(run=key_list)
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
    lock.set_defaults(run=spend_lock)
    verbs.add_parser("clear", help="let new GPU work start again").set_defaults(run=spend_clear)
    verbs.add_parser("show", help="whether new GPU work is paused").set_defaults(run=spend_show)


def _add_usage_command(nouns: argparse._SubParsersAction) -> None:
    report = nouns.add_parser("usage", help="settled tokens per UTC day, and the running Holds")
    report.add_argument("user", metavar="NAME_OR_ID")
    report.add_argument("--key", metavar="KEY_ID", help="one key alone")
    report.add_argument("--from", dest="first", metavar="YYYY-MM-DD", 
                        help="first day; this month's first by default")
    report.add_argument("--to", dest="last", metavar="YYYY-MM-DD", help="last day; today by default")
    report.set_defaults(run=usage_show)


async def run(url: str, command: Command, args: argparse.Namespace) -> None:
    await upgrade(url)
    engine = make_engine(url)
    # Commands change money: on SQLite they take the write lock at BEGIN, as the Hold path does.
    writer = engine.execution_options(sqlite_begin="IMMEDIATE") if is_sqlite(url) else engine
    try:
        # No session.begin() block: the ledger's money functions commit themselves.
        async with session_factory(writer)() as session:
            await command(session, args)
            await session.commit()
    finally:
        await engine.dispose()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        asyncio.run(run(database_url_from_env(), args.run, args))
    except LedgerError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
