"""The operator's command line: users, API keys, tokens, the spend, warm windows, usage, background work.

Its entry is `python -m cluster.admin` (cluster/admin.py): it reads the
settings and the catalog and hands them down as an `AdminConfig`, as the
ledger reads neither. Each command parses its arguments, calls the shared
service layer (`domain/operations/`, which the admin routes call too) and prints.

    python -m cluster.admin user create NAME
    python -m cluster.admin user list [--tag TAG] [--json]
    python -m cluster.admin user show NAME_OR_ID [--json]
    python -m cluster.admin user suspend|restore NAME_OR_ID
    python -m cluster.admin user allowance NAME_OR_ID TOKENS|default
    python -m cluster.admin user harvest-quota NAME_OR_ID N|default
    python -m cluster.admin user role NAME_OR_ID admin|user
    python -m cluster.admin user tag NAME_OR_ID add|remove TAG
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
    python -m cluster.admin warm add MODEL --days DAYS --from HH:MM --to HH:MM [--time-zone ZONE] [--json]
    python -m cluster.admin warm now MODEL HOURS [--json]
    python -m cluster.admin warm list [--model MODEL] [--json]
    python -m cluster.admin warm remove WINDOW_ID
    python -m cluster.admin usage NAME_OR_ID [--key KEY_ID] [--from YYYY-MM-DD] [--to YYYY-MM-DD] [--json]
    python -m cluster.admin analytics users|budget|platform|usage [--from YYYY-MM-DD] [--to YYYY-MM-DD]
    python -m cluster.admin work list [--user NAME_OR_ID] [--status STATUS] [--limit N] [--json]
    python -m cluster.admin work cancel WORK_ID
    python -m cluster.admin work capacity job N
    python -m cluster.admin token-request list [--status STATUS] [--json]
    python -m cluster.admin token-request approve ID [--tokens TOKENS]
    python -m cluster.admin token-request reject ID [--note TEXT]
    python -m cluster.admin application list [--status waiting|approved|rejected] [--json]
    python -m cluster.admin application approve|reject ID_OR_EMAIL [--grant TOKENS] [--note TEXT]
    python -m cluster.admin invite create EMAIL [--tokens TOKENS] [--tag TAG] [--json]
    python -m cluster.admin user password-link EMAIL

TOKENS is a whole number such as 2500000, or with a suffix as the App
writes it: 50K, 2.5M. A TAG is written as the App writes it: `Hiring 2026 08`
is `hiring-2026-08`. DAYS are `mon-fri`, `sat,sun` or `1,2,3` (Monday is 1).
`--json` prints one JSON document for scripts, the same document the admin
routes answer: ids are strings, times ISO 8601 in UTC, tokens numbers, money
USD. `analytics` prints JSON only. `key show` takes a key id or a whole key (to
find whose it is); a key is never printed back. Migrations are applied first.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel.ext.asyncio.session import AsyncSession

from cluster.admin_cli import access as admin_access
from cluster.admin_cli import token_requests as admin_token_requests
from ledger.tokens import analytics
from ledger.accounts import keys
from ledger.tokens import usage
from cluster.admin_cli.text import dollars, print_fields, print_json, print_key_table, print_table, when
from ledger.store.coltypes import utcnow
from ledger.store.db import is_sqlite, make_engine, session_factory
from ledger.errors import LedgerError, NameRefused
from ledger.accounts.mail import deliver_pending
from ledger.store.migrate import upgrade
from ledger.accounts.tables import Role, Standing
from ledger.work.tables import WorkKind, WorkStatus
from domain.operations import (
    analytics_tabs, api_keys, arguments, background, documents, spend_page, tokens, users, warm_windows,
)
from domain.operations.platform import DEFAULT_SPEND_PAUSE_USD, Platform
from domain.operations.usage_report import DAY_COUNTS, usage_report
from ledger.tokens.holds import DEFAULT_MONTHLY_ALLOWANCE


@dataclass(frozen=True)
class AdminConfig:
    """What the commands take from the settings and the catalog (cluster/admin.py reads them)."""

    database_url: str
    monthly_allowance: int = DEFAULT_MONTHLY_ALLOWANCE  # of a user without an allowance of its own
    job_result_kept: timedelta = timedelta(days=30)
    # "This month" and "today" of the views, and the time of a change: tests hand in a fixed clock.
    clock: Callable[[], datetime] = utcnow
    spend_pause_usd: float = DEFAULT_SPEND_PAUSE_USD
    # What a Warm hour of each served model costs (the catalog's); the models a window may keep Warm.
    replica_hour_usd: Mapping[str, float] = field(default_factory=dict)
    floors: Mapping[str, int] = field(default_factory=dict)  # each served model's min_replicas
    # Who a Lock, a Clear or a window of the command line is recorded as made by.
    operator: str = "command line"
    # The App's mail (ledger.accounts.mail.Mailer; None leaves it in the outbox for the Runner) and where its
    # links point: ACS_PUBLIC_BASE_URL, which the settings demand outside development (cluster/admin.py
    # hands it in); never an address that a request names. This default is the embedded start's own.
    mailer: Any = None
    public_base_url: str = "http://127.0.0.1:8000"

    @property
    def platform(self) -> Platform:
        return Platform(monthly_allowance=self.monthly_allowance, job_result_kept=self.job_result_kept,
                        spend_pause_usd=self.spend_pause_usd, replica_hour_usd=self.replica_hour_usd,
                        floors=self.floors,
                        clock=self.clock)


Command = Callable[[AsyncSession, argparse.Namespace, AdminConfig], Awaitable[None]]


async def ensure_local_user_and_key(url: str, user_name: str = "local", key_name: str = "local") -> str | None:
    """For the embedded start: make the local user, an admin (its platform is its own), and a key
    on first start.

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
            user.role = Role.admin
            _, raw_key = await keys.create_api_key(session, user.id, key_name)
            return raw_key
    except (IntegrityError, NameRefused):
        return None  # a concurrent start made the user first
    finally:
        await engine.dispose()


# Users ------------------------------------------------------------------------
async def user_create(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    user = await users.create_user(session, args.name)
    print(f"{user.id}\t{user.name}")


async def user_list(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    lines, now = await users.user_lines(session, config.platform, args.tag), config.clock()
    if args.json:
        return print_json({"users": [documents.user_line(line, now) for line in lines]})
    header = ("ID", "NAME", "ROLE", "STANDING", "MONTHLY ALLOWANCE", "TAGS", "ENGAGEMENT", "LAST COMPLETION",
              "CREATED")
    print_table(header, [_user_row(line, now) for line in lines])


def _user_row(line: users.UserLine, now: datetime) -> tuple[str, ...]:
    allowance = "default" if line.allowance_is_default else str(line.monthly_allowance)
    return (str(line.user_id), line.name, line.role.value, line.standing.value, allowance,
            ",".join(line.tags) or "-", _engagement(line.activity, now), when(line.activity.last_completion_at),
            when(line.created_at))


def _engagement(found: analytics.Activity, now: datetime) -> str:
    return found.engagement(now).value.replace("_", " ")


async def user_standing(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    standing = Standing.suspended if args.action == "suspend" else Standing.active
    user = await users.set_standing(session, args.user, standing)
    print(f"{user.id}\t{user.name}\t{user.standing.value}")


async def user_allowance(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    wanted = None if args.tokens.strip().lower() == "default" else arguments.tokens(args.tokens, least=0)
    user, allowance = await users.set_allowance(session, config.platform, args.user, wanted)
    shown = f"the default, {allowance}" if wanted is None else str(allowance)
    print(f"The monthly allowance of {user.name!r} is {shown} tokens.")


async def user_harvest_quota(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    """The harvests that each key of the user may start in a UTC month (the spec: 200)."""
    text = args.count.strip().lower()
    if text != "default" and not text.isdigit():
        raise LedgerError(f"{args.count!r} is not a number of harvests (0 or more) or `default`.")
    user, quota = await users.set_harvest_quota(session, args.user, None if text == "default" else int(text))
    shown = f"the default, {quota}," if text == "default" else str(quota)
    print(f"Each API key of {user.name!r} may start {shown} {'harvest' if quota == 1 else 'harvests'} "
          "a UTC month.")


async def user_role(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    user = await users.set_role(session, args.user, Role(args.role))
    print(f"{user.id}\t{user.name}\t{user.role.value}")


async def user_tag(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    change = users.add_tag if args.action == "add" else users.remove_tag
    user, tags = await change(session, args.user, args.tag)
    print(f"{user.id}\t{user.name}\t{','.join(tags) or '-'}")


async def user_show(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    page = await users.user_page(session, config.platform, args.user)
    found, now = page.account, config.clock()
    if args.json:
        return print_json(documents.account(found))
    allowance = f"{found.allowance} tokens a month" + (" (the default)" if found.allowance_is_default else "")
    print_fields((
        ("User", found.name), ("Id", str(found.user_id)), ("Role", page.role.value),
        ("Standing", found.standing.value), ("Tags", ", ".join(page.tags) or "-"),
        ("Engagement", _engagement(page.activity, now)),
        ("Last Completion", when(page.activity.last_completion_at)),
        ("Monthly allowance", allowance),
        ("Used this month", f"{found.allowance_used} of the allowance, running Holds included"),
        ("Allowance left", str(found.allowance_left)),
        ("Budget left", str(found.budget_left)),
        ("Tokens this month", f"{found.tokens_this_month}, every key; {found.running} Holds running"),
    ))
    print()
    print_key_table(found.keys)


# Tokens -------------------------------------------------------------------------
async def grant_tokens(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    amount = arguments.tokens(args.tokens, least=1)
    note = arguments.short_text(args.note, "A Grant's note")
    key_id = arguments.key_id(args.key) if args.key else None
    left = await tokens.grant(session, args.user, amount, key_id=key_id, note=note)
    print(f"Granted {amount} tokens to {left.name()}: {left.tokens} left.")


async def budget_set(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    amount = arguments.tokens(args.tokens, least=0)
    key_id = arguments.key_id(args.key) if args.key else None
    left = await tokens.set_budget(session, args.user, amount, key_id=key_id)
    print(f"Set {left.name()} to {left.tokens} tokens.")


# Keys ---------------------------------------------------------------------------
async def key_create(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    user, key, raw_key = await api_keys.create_key(session, args.user, args.name)
    print(f"Key {key.id} ({key.name!r}) of {user.name!r}. It is shown only now:", file=sys.stderr)
    print(raw_key)


async def key_list(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    user, lines = await api_keys.key_lines(session, config.clock(), args.user, include_revoked=args.all)
    if args.json:
        return print_json(documents.key_lines(user, lines))
    print_key_table(lines)


async def key_show(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    """One key and its user, found by its id or by the whole key (never printed back)."""
    page = await api_keys.key_page(session, config.clock(), args.key)
    if args.json:
        return print_json(documents.key_page(page))
    line, owner = page.line, page.owner
    budget = "-" if line.budget_left is None else str(line.budget_left)
    print_fields((
        ("Key", line.key.name), ("Id", str(line.key.id)), ("Prefix", f"{line.key.prefix}..."),
        ("Status", line.key.status.value), ("User", owner.name), ("User id", str(owner.user_id)),
        ("User standing", owner.standing), ("Tokens this month", str(line.tokens_this_month)),
        ("Budget left", budget), ("Created", when(line.key.created_at)), ("Last used", when(line.key.last_used_at)),
    ))


async def key_rename(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    key = await api_keys.rename_key(session, arguments.key_id(args.key_id), args.name)
    print(f"{key.id}\t{key.name}\t{key.status.value}")


async def key_status(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    key = await api_keys.set_key_status(session, arguments.key_id(args.key_id), args.action)
    print(f"{key.id}\t{key.name}\t{key.status.value}")


# The spend ----------------------------------------------------------------------------
async def spend_lock(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    _print_spend(await spend_page.lock(session, config.platform, config.operator, args.reason), args.json)


async def spend_clear(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    _print_spend(await spend_page.clear(session, config.platform, config.operator), args.json)


async def spend_show(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    _print_spend(await spend_page.spend_page(session, config.platform), args.json)


def _print_spend(page: spend_page.SpendPage, as_json: bool) -> None:
    if as_json:
        return print_json(documents.spend_page(page))
    stop = page.stop
    state = "locked: new GPU work is refused" if stop.locked else "clear"
    print_table(("SPEND STOP", "REASON", "CHANGED"), [(state, stop.reason or "-", when(stop.changed_at))])
    print()
    print_fields((
        ("GPU spend, last 24 hours", dollars(page.last_24h_usd)),
        ("Counted by the pause", f"{dollars(page.counted_since_clear_usd)} since the last Clear, within 24 hours"),
        ("Pauses new GPU work above", dollars(page.pause_usd)),
        ("Last counted", when(page.last_counted_at)),
    ))
    print("\nLast 24 hours by model")
    print_table(("MODEL", "SPEND", "GPU HOURS"),
                [(each.model_id, dollars(each.usd), f"{each.gpu_hours:.2f}") for each in page.by_model])
    print("\nChanges of the stop")
    print_table(("AT", "CHANGE", "BY", "REASON"), [
        (when(change.at), change.kind.value, change.by or "-", change.reason or "-") for change in page.changes])


# Warm windows ---------------------------------------------------------------------------
async def warm_add(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    line = await warm_windows.add_window(
        session, config.platform, args.model, arguments.weekdays(args.days),
        arguments.minute_of_day(args.start, "From"), arguments.minute_of_day(args.end, "To"),
        args.time_zone, config.operator)
    _print_windows([line], args.json, single=True)


async def warm_now(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    line = await warm_windows.warm_now(session, config.platform, args.model, args.hours, config.operator)
    _print_windows([line], args.json, single=True)


async def warm_list(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    models, lines = await warm_windows.warm_tab(session, config.platform, args.model)
    if args.json:
        return print_json(documents.warm_tab(models, lines))
    _print_windows(lines, as_json=False)


async def warm_remove(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    line = await warm_windows.remove_window(session, config.platform, arguments.window_id(args.window_id))
    print(f"Removed the window {line.window.id} of {line.window.model_id}: {_window_cost(line)}.")


def _print_windows(lines: Sequence[warm_windows.WindowLine], as_json: bool, single: bool = False) -> None:
    if as_json:
        found = [documents.window_line(line) for line in lines]
        return print_json(found[0] if single else {"windows": found})
    print_table(("ID", "MODEL", "WHEN", "ON NOW", "COST", "NEXT 7 DAYS", "BY"), [
        (str(line.window.id), line.window.model_id, _window_when(line), "yes" if line.on_now else "no",
         _window_cost(line), dollars(line.next_7_days_usd), line.window.created_by or "-") for line in lines])


def _window_when(line: warm_windows.WindowLine) -> str:
    window = line.window
    if not line.weekly:
        return f"now, until {when(window.ends_at)}"
    names = {number: name for name, number in arguments.WEEKDAYS.items()}
    days = ",".join(names[int(day)] for day in window.days.split(","))
    return (f"{days} {documents.clock_time(window.start_minute)}-{documents.clock_time(window.end_minute)} "
            f"{window.time_zone}")


def _window_cost(line: warm_windows.WindowLine) -> str:
    each = "a week" if line.weekly else "in all"
    return f"{line.hours:g} hours {each}, {dollars(line.usd)}"


# Background work ---------------------------------------------------------------------
async def work_list(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    status = WorkStatus(args.status) if args.status else None
    lines = await background.work_lines(session, who=args.user, status=status, limit=args.limit)
    if args.json:
        return print_json({"work": [documents.work_line(line) for line in lines]})
    header = ("ID", "KIND", "MODEL", "STATUS", "ATTEMPTS", "CREATED", "STARTED", "FINISHED", "RESULT", "PROGRESS")
    print_table(header, [_work_row(line) for line in lines])


def _work_row(line: background.WorkLine) -> tuple[str, ...]:
    row, found = line.row, line.progress
    progress = "-" if found is None else f"prompts={found[0]}/{found[1]}"  # what its GPU run has read
    return (str(row.id), row.kind.value, row.model, row.status.value, str(row.attempts), when(row.created_at),
            when(row.started_at), when(row.finished_at), "-" if row.result_status is None else str(row.result_status),
            progress)


async def work_cancel(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    row = await background.cancel(session, config.platform, arguments.work_id(args.work_id))
    print(f"{row.id}\t{row.status.value}")


async def work_capacity(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    await background.set_capacity(session, WorkKind(args.kind), args.count)
    print(f"{args.kind}\tat most {args.count} at once")


# Usage and analytics ----------------------------------------------------------------
async def usage_show(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    first = arguments.day(args.first) if args.first else None
    last = arguments.day(args.last) if args.last else None
    key_id = arguments.key_id(args.key) if args.key else None
    report = await usage_report(session, config.clock(), args.user, key_id=key_id, first=first, last=last)
    if args.json:
        return print_json(documents.usage_report(report))
    title = repr(report.user_name) + (f", key {report.key_name!r}" if report.key_id else "")
    print(f"Usage of {title}, UTC days {report.first} to {report.last}: settled Completions")
    _print_days(report.days)
    print()
    print("Running Holds")
    rows = [(when(h.started), str(h.hold_id), h.key_name or "-", h.model, h.source.value, str(h.tokens))
            for h in report.running]
    print_table(("STARTED", "HOLD", "KEY", "MODEL", "SOURCE", "TOKENS HELD"), rows)


def _print_days(days: Sequence[usage.DayUsage]) -> None:
    rows = [(d.day.isoformat(), *(str(getattr(d, name)) for name in DAY_COUNTS)) for d in days]
    totals = ("TOTAL", *(str(sum(getattr(d, name) for d in days)) for name in DAY_COUNTS))
    print_table(("DAY", *(name.upper() for name in DAY_COUNTS)), [*rows, totals])


async def analytics_show(session: AsyncSession, args: argparse.Namespace, config: AdminConfig) -> None:
    """One tab of Analytics as JSON, for the days given (this month up to today by default)."""
    first = arguments.day(args.first) if args.first else None
    last = arguments.day(args.last) if args.last else None
    print_json(await analytics_tabs.tab(session, config.platform, args.tab, first, last))


# Parsing and running --------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m cluster.admin", description=(__doc__ or "").split("\n")[0])
    parser.set_defaults(json=False)
    nouns = parser.add_subparsers(dest="noun", required=True)
    users_verbs = _verbs(nouns, "user", "users")
    _add_user_commands(users_verbs)
    admin_access.add_user_access_commands(users_verbs)
    _add_key_commands(_verbs(nouns, "key", "API keys"))
    _add_token_commands(nouns)
    _add_spend_commands(_verbs(nouns, "spend", "the GPU spend and its stop: while locked, no new GPU work starts"))
    _add_warm_commands(_verbs(nouns, "warm", "warm windows: times when a model keeps one replica running"))
    _add_usage_commands(nouns)
    _add_work_commands(_verbs(nouns, "work", "background work: Jobs, Loom Nodes and harvests"))
    admin_token_requests.add_commands(nouns)
    admin_access.add_application_commands(nouns, _json_flag)
    return parser


def _json_flag(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--json", action="store_true", help="print one JSON document, for scripts")
    return parser


def _verbs(nouns: argparse._SubParsersAction, noun: str, about: str) -> argparse._SubParsersAction:
    return nouns.add_parser(noun, help=about).add_subparsers(dest="verb", required=True)


def _add_user_commands(verbs: argparse._SubParsersAction) -> None:
    create = verbs.add_parser("create", help="make a user")
    create.add_argument("name")
    create.set_defaults(run=user_create)
    listing = verbs.add_parser("list", help="list the users, with their tags and engagement")
    listing.add_argument("--tag", help="only the users with this tag")
    _json_flag(listing).set_defaults(run=user_list)
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
    role = verbs.add_parser("role", help="make a user an admin (the admin routes), or a user again")
    role.add_argument("user", metavar="NAME_OR_ID")
    role.add_argument("role", choices=[role.value for role in Role])
    role.set_defaults(run=user_role)
    tag = verbs.add_parser("tag", help="put a tag on a user, or take it off")
    tag.add_argument("user", metavar="NAME_OR_ID")
    tag.add_argument("action", choices=("add", "remove"))
    tag.add_argument("tag", metavar="TAG")
    tag.set_defaults(run=user_tag)


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
    for action in api_keys.STATUS_OF_ACTION:
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
    show = verbs.add_parser("show", help="the spend of the last 24 hours, and whether new GPU work is paused")
    _json_flag(show).set_defaults(run=spend_show)


def _add_warm_commands(verbs: argparse._SubParsersAction) -> None:
    add = verbs.add_parser("add", help="keep a model Warm each week on some days, From a time To a time")
    add.add_argument("model", metavar="MODEL")
    add.add_argument("--days", required=True, metavar="DAYS", help="mon-fri, sat,sun or 1,2,3 (Monday is 1)")
    add.add_argument("--from", dest="start", required=True, metavar="HH:MM")
    add.add_argument("--to", dest="end", required=True, metavar="HH:MM",
                     help="at or before From: the window ends the next day")
    add.add_argument("--time-zone", default="UTC", metavar="ZONE", help="an IANA zone such as Europe/Berlin")
    _json_flag(add).set_defaults(run=warm_add)
    now = verbs.add_parser("now", help="keep a model Warm from now for 1 to 24 hours")
    now.add_argument("model", metavar="MODEL")
    now.add_argument("hours", type=int, metavar="HOURS")
    _json_flag(now).set_defaults(run=warm_now)
    listing = verbs.add_parser("list", help="the windows, with what each costs")
    listing.add_argument("--model", metavar="MODEL")
    _json_flag(listing).set_defaults(run=warm_list)
    remove = verbs.add_parser("remove", help="stop a window")
    remove.add_argument("window_id", metavar="WINDOW_ID")
    remove.set_defaults(run=warm_remove)


def _add_usage_commands(nouns: argparse._SubParsersAction) -> None:
    report = nouns.add_parser("usage", help="settled tokens per UTC day, and the running Holds")
    report.add_argument("user", metavar="NAME_OR_ID")
    report.add_argument("--key", metavar="KEY_ID", help="one key alone")
    _days_flags(report)
    _json_flag(report).set_defaults(run=usage_show)
    tabs = nouns.add_parser("analytics", help="the numbers of one Analytics tab, as JSON")
    tabs.add_argument("tab", choices=analytics_tabs.TABS)
    _days_flags(tabs)
    _json_flag(tabs).set_defaults(run=analytics_show)  # JSON either way: the flag is for scripts that pass it


def _days_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--from", dest="first", metavar="YYYY-MM-DD", help="first day; this month's first by default")
    parser.add_argument("--to", dest="last", metavar="YYYY-MM-DD", help="last day; today by default")


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


async def run(config: AdminConfig, command: Command, args: argparse.Namespace) -> None:
    url = config.database_url
    await upgrade(url)
    engine = make_engine(url)
    # Commands change money: on SQLite they take the write lock at BEGIN, as the Hold path does.
    writer = engine.execution_options(sqlite_begin="IMMEDIATE") if is_sqlite(url) else engine
    try:
        # No session.begin() block: the operations commit themselves.
        async with session_factory(writer)() as session:
            await command(session, args, config)
            await session.commit()
        # After the commit: the mail of the links that the command made (the Runner retries what fails).
        await deliver_pending(session_factory(writer), config.mailer, config.clock())
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
