"""The admin's commands for the App's token requests (spec: "Decide token requests"):

    python -m cluster.admin token-request list [--status waiting|approved|rejected] [--json]
    python -m cluster.admin token-request approve ID [--tokens TOKENS]
    python -m cluster.admin token-request reject ID [--note TEXT]

An approval is a Grant to the User's Budget, of the tokens asked for or of `--tokens`, with the
note "token request". `cluster/admin_cli/commands.py` registers these (`add_commands`).
"""
from __future__ import annotations

import argparse
import uuid
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from cluster.admin_cli.text import print_json, print_table, when
from ledger.errors import LedgerError
from domain.operations import arguments, token_requests
from ledger.tokens.tables import TokenRequestStatus


def request_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise LedgerError(f"{text!r} is not a token request id: `token-request list` shows them.") from None


async def list_requests(session: AsyncSession, args: argparse.Namespace, config: Any) -> None:
    status = TokenRequestStatus(args.status) if args.status else None
    lines = await token_requests.request_lines(session, status)
    if args.json:
        return print_json({"token_requests": [token_requests.line_document(line) for line in lines]})
    header = ("ID", "USER", "SENT", "TOKENS", "MODELS", "PROJECT", "STATUS", "GRANTED")
    print_table(header, [_row(line) for line in lines])


def _row(line: token_requests.RequestLine) -> tuple[str, ...]:
    request = line.request
    granted = "-" if request.granted is None else str(request.granted)
    return (str(request.id), line.user_email or line.user_name, when(request.created_at), str(request.tokens),
            ",".join(request.models), request.project, request.status.value, granted)


async def approve(session: AsyncSession, args: argparse.Namespace, config: Any) -> None:
    tokens = arguments.tokens(args.tokens, least=1) if args.tokens else None
    request = await token_requests.approve(session, request_id(args.id), tokens=tokens,
                                           decided_by=config.operator, now=config.clock())
    print(f"Approved {request.id}: granted {request.granted} tokens (asked {request.tokens}).")


async def reject(session: AsyncSession, args: argparse.Namespace, config: Any) -> None:
    request = await token_requests.reject(session, request_id(args.id), note=args.note,
                                          decided_by=config.operator, now=config.clock())
    print(f"Rejected {request.id}.")


def add_commands(nouns: argparse._SubParsersAction) -> None:
    verbs = nouns.add_parser("token-request", help="the App's token requests: list, approve with a Grant, reject")
    verbs = verbs.add_subparsers(dest="verb", required=True)
    listing = verbs.add_parser("list", help="the requests, oldest first")
    listing.add_argument("--status", choices=[status.value for status in TokenRequestStatus])
    listing.add_argument("--json", action="store_true", help="print one JSON document, for scripts")
    listing.set_defaults(run=list_requests)
    approving = verbs.add_parser("approve", help="grant the tokens asked for, or --tokens, to the User's Budget")
    approving.add_argument("id", metavar="ID")
    approving.add_argument("--tokens", metavar="TOKENS", help="another number than asked for, such as 50K")
    approving.set_defaults(run=approve)
    rejecting = verbs.add_parser("reject", help="reject a request, with a note that the User reads")
    rejecting.add_argument("id", metavar="ID")
    rejecting.add_argument("--note", default="", metavar="TEXT")
    rejecting.set_defaults(run=reject)
