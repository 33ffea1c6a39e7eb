"""The operator's command line for users and API keys.

    python -m ledger.admin user create NAME
    python -m ledger.admin user list
    python -m ledger.admin user suspend|restore NAME_OR_ID
    python -m ledger.admin key create --user NAME_OR_ID --name KEYNAME
    python -m ledger.admin key list --user NAME_OR_ID [--all]
    python -m ledger.admin key pause|resume|revoke KEY_ID

It works on the database of ACS_DATABASE_URL and applies migrations first.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlmodel.ext.asyncio.session import AsyncSession

from ledger import keys
from ledger.db import database_url_from_env, make_engine, session_factory
from ledger.errors import LedgerError, NameRefused
from ledger.migrate import upgrade
from ledger.models import ApiKey, KeyStatus, Standing, User

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


# Commands -------------------------------------------------------------------
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


async def key_create(session: AsyncSession, args: argparse.Namespace) -> None:
    user = await keys.find_user(session, args.user)
    key, raw_key = await keys.create_api_key(session, user.id, args.name)
    print(f"Key {key.id} ({key.name!r}) of {user.name!r}. It is shown only now:", file=sys.stderr)
    print(raw_key)


async def key_list(session: AsyncSession, args: argparse.Namespace) -> None:
    user = await keys.find_user(session, args.user)
    found = await keys.list_keys(session, user.id, include_revoked=args.all)
    _print_table(("ID", "NAME", "KEY", "STATUS", "CREATED", "LAST USED"), [_key_row(k) for k in found])


async def key_status(session: AsyncSession, args: argparse.Namespace) -> None:
    status = {"pause": KeyStatus.paused, "resume": KeyStatus.active, "revoke": KeyStatus.revoked}
    key = await keys.set_key_status(session, _key_id(args.key_id), status[args.action])
    print(f"{key.id}\t{key.name}\t{key.status.value}")


# Output ---------------------------------------------------------------------
def _user_row(user: User) -> tuple[str, ...]:
    allowance = "default" if user.monthly_allowance is None else str(user.monthly_allowance)
    return (str(user.id), user.name, user.standing.value, allowance, _when(user.created_at))


def _key_row(key: ApiKey) -> tuple[str, ...]:
    shown = f"{key.prefix}..."
    return (str(key.id), key.name, shown, key.status.value, _when(key.created_at), _when(key.last_used_at))


def _when(moment: datetime | None) -> str:
    return "-" if moment is None else moment.strftime("%Y-%m-%d %H:%M UTC")


def _print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())


def _key_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise LedgerError(f"{text!r} is not a key id: `key list --user ...` shows them.") from None


# Parsing and running --------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ledger.admin", description=__doc__.split("\n")[0])
    nouns = parser.add_subparsers(dest="noun", required=True)
    _add_user_commands(nouns.add_parser("user", help="users").add_subparsers(dest="verb", required=True))
    _add_key_commands(nouns.add_parser("key", help="API keys").add_subparsers(dest="verb", required=True))
    return parser


def _add_user_commands(verbs: argparse._SubParsersAction) -> None:
    create = verbs.add_parser("create", help="make a user")
    create.add_argument("name")
    create.set_defaults(run=user_create)
    verbs.add_parser("list", help="list the users").set_defaults(run=user_list)
    for action in ("suspend", "restore"):
        standing = verbs.add_parser(action, help=f"{action} a user's access")
        standing.add_argument("user", metavar="NAME_OR_ID")
        standing.set_defaults(run=user_standing, action=action)


def _add_key_commands(verbs: argparse._SubParsersAction) -> None:
    create = verbs.add_parser("create", help="make a key and print it once")
    create.add_argument("--user", required=True, metavar="NAME_OR_ID")
    create.add_argument("--name", required=True, metavar="KEYNAME")
    create.set_defaults(run=key_create)
    listing = verbs.add_parser("list", help="list a user's keys")
    listing.add_argument("--user", required=True, metavar="NAME_OR_ID")
    listing.add_argument("--all", action="store_true", help="revoked keys too")
    listing.set_defaults(run=key_list)
    for action in ("pause", "resume", "revoke"):
        change = verbs.add_parser(action, help=f"{action} a key")
        change.add_argument("key_id", metavar="KEY_ID")
        change.set_defaults(run=key_status, action=action)


async def run(url: str, command: Command, args: argparse.Namespace) -> None:
    await upgrade(url)
    engine = make_engine(url)
    try:
        async with session_factory(engine)() as session, session.begin():
            await command(session, args)
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
