"""How a Loom's refusals name the way past them, by where the request came from.

The API's messages name its routes, such as `POST /v1/looms/{loom_id}/cancel`, and stay as they
are. A person on the App's Loom page has no API key to send those with: there the same refusal names
the page's button (spec: "Use the Loom page"). LoomService picks one Wording for its caller and
hands its names to the ledger's checks (ledger/work/looms.py), so each message is written once.
"""
from __future__ import annotations

from dataclasses import dataclass

from ledger.work import looms


@dataclass(frozen=True)
class Wording:
    stop: str  # how to stop a Loom's growing Branch, with {loom_id} to fill where it names one


API = Wording(stop=looms.STOP_ROUTE)
APP = Wording(stop="Stop")  # the Loom page's button that stops every growing Node


def wording(in_app: bool) -> Wording:
    return APP if in_app else API
