"""How a Loom's refusals name the way past them, by where the request came from.

The API's messages name its routes, such as `POST /v1/looms/{loom_id}/cancel`, and stay as they
are. A person on the App's Loom page has no API key to send those with: there the same refusal names
the page's button (spec: "Use the Loom page"). LoomService picks one Wording for its caller and
hands its names to the ledger's checks (ledger/work/looms.py, ledger/work/loom_changes.py), so each
message is written once.
"""
from __future__ import annotations

from dataclasses import dataclass

from ledger.work import loom_changes, looms


@dataclass(frozen=True)
class Wording:
    """Each with {loom_id} to fill where it names a route."""
    stop: str  # how to stop a Loom's growing Branch
    new_root: str  # how to replace the tree with a new root
    delete_loom: str  # how to delete the whole Loom


API = Wording(stop=looms.STOP_ROUTE, new_root=loom_changes.NEW_ROOT_ROUTE, delete_loom=loom_changes.DELETE_LOOM_ROUTE)
# The Loom page's buttons: Stop stops every growing Node; New root opens "Write a new root", whose
# Replace the tree replaces it; Delete Loom, by the Loom's title.
APP = Wording(stop="Stop", new_root="New root", delete_loom="Delete Loom")


def wording(in_app: bool) -> Wording:
    return APP if in_app else API
