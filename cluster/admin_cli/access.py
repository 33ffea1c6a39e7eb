"""The command line's access commands: Applications, Invites and password links.

    python -m cluster.admin application list [--status waiting|approved|rejected] [--json]
    python -m cluster.admin application approve ID_OR_EMAIL [--grant TOKENS]
    python -m cluster.admin application reject ID_OR_EMAIL [--note TEXT]
    python -m cluster.admin invite create EMAIL [--tokens TOKENS] [--tag TAG] [--json]
    python -m cluster.admin user password-link EMAIL

An approval mails "Your ACS Infra application is approved" with a password link of 7 days; a
rejection mails a link to the Apply form; `invite create` prints the invite link (it mails nothing);
`user password-link` mails "Set your password" or "Reset your password" (1 hour). The links point at
the App's public URL (ACS_PUBLIC_BASE_URL). The mail goes out after the command's commit.
"""
from __future__ import annotations

import argparse
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from ledger.accounts.tables import ApplicationStatus
from cluster.admin_cli.text import print_fields, print_json, print_table, when
from domain.operations import access
from domain.operations.documents import iso


async def application_list(session: AsyncSession, args: argparse.Namespace, config: Any) -> None:
    found = await access.list_applications(session, args.status)
    if args.json:
        return print_json({"applications": [access.application_document(each) for each in found]})
    header = ("ID", "EMAIL", "NAME", "ORGANIZATION", "STATUS", "CREATED", "PLANNED USAGE")
    print_table(header, [(str(each.id), each.email, each.name, each.organization, each.status.value,
                          when(each.created_at), _short(each.planned_usage)) for each in found])


def _short(text: str, limit: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


async def application_approve(session: AsyncSession, args: argparse.Namespace, config: Any) -> None:
    application, user = await access.approve(session, args.application, config.clock(), config.public_base_url,
                                             grant=args.grant, decided_by=config.operator)
    print(f"Approved {application.email}: User {user.id} ({user.name}). The approval email has the password link.")


async def application_reject(session: AsyncSession, args: argparse.Namespace, config: Any) -> None:
    application = await access.reject(session, args.application, config.clock(), config.public_base_url,
                                      note=args.note, decided_by=config.operator)
    print(f"Rejected {application.email}. The email links to the Apply form.")


async def invite_create(session: AsyncSession, args: argparse.Namespace, config: Any) -> None:
    made = await access.create_invite(session, args.email, config.clock(), config.public_base_url,
                                      tokens=args.tokens, tag=args.tag, created_by=config.operator)
    if args.json:
        return print_json({"id": str(made.invite_id), "email": made.email, "link": made.link,
                           "expires_at": iso(made.expires_at), "tokens": made.tokens, "tag": made.tag})
    print_fields((("Invite", made.link), ("Email", made.email), ("Works until", when(made.expires_at)),
                  ("Tokens", str(made.tokens) if made.tokens else "-"), ("Tag", made.tag or "-")))


async def user_password_link(session: AsyncSession, args: argparse.Namespace, config: Any) -> None:
    purpose = await access.send_password_link(session, args.email, config.clock(), config.public_base_url)
    subject = "Reset your password" if purpose.value == "reset" else "Set your password"
    print(f"Sent {args.email.strip().lower()} the email {subject!r}; its link works once, for 1 hour.")


def add_application_commands(nouns: argparse._SubParsersAction, json_flag: Any) -> None:
    verbs = nouns.add_parser("application", help="Applications for access").add_subparsers(dest="verb", required=True)
    listing = verbs.add_parser("list", help="the Applications, oldest first")
    listing.add_argument("--status", choices=[status.value for status in ApplicationStatus])
    json_flag(listing).set_defaults(run=application_list)
    approve = verbs.add_parser("approve", help="make the User and mail the approval, with its password link")
    approve.add_argument("application", metavar="ID_OR_EMAIL")
    approve.add_argument("--grant", metavar="TOKENS", help="tokens for the new User's Budget, such as 2.5M")
    approve.set_defaults(run=application_approve)
    reject = verbs.add_parser("reject", help="mail the rejection, with a link to the Apply form")
    reject.add_argument("application", metavar="ID_OR_EMAIL")
    reject.add_argument("--note", default="", metavar="TEXT", help="a reason, written into the email")
    reject.set_defaults(run=application_reject)
    invite = nouns.add_parser("invite", help="invite links").add_subparsers(dest="verb", required=True)
    create = invite.add_parser("create", help="print an invite link (7 days, once) whose form approves at once")
    create.add_argument("email", metavar="EMAIL")
    create.add_argument("--tokens", metavar="TOKENS", help="tokens for the new User's Budget")
    create.add_argument("--tag", metavar="TAG", help="a tag for the new User")
    json_flag(create).set_defaults(run=invite_create)


def add_user_access_commands(verbs: argparse._SubParsersAction) -> None:
    link = verbs.add_parser("password-link", help="mail a User a link to set (or reset) the password")
    link.add_argument("email", metavar="EMAIL")
    link.set_defaults(run=user_password_link)
