"""`python -m cluster.invariants [--database-url URL]`: check the ledger's invariants (issue 38's
chaos soak) on the ledger of the settings (ACS_DATABASE_URL, else the embedded SQLite file), or on
URL. Prints each invariant with its count of violations and the first few subjects; exits 1 when
any is broken, 0 when none is. Run it once the work is quiet and the leases have had their time."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from domain.settings import get_settings
from ledger.audit import Invariant, Violation, check_database

SHOWN = 5  # subjects printed per invariant


def report(violations: Sequence[Violation], shown: int = SHOWN) -> str:
    """One line per invariant, `ok` or its count, then its first `shown` subjects with their detail."""
    lines = []
    for invariant in Invariant:
        mine = [violation for violation in violations if violation.invariant is invariant]
        lines.append(f"{invariant.value}: {len(mine) or 'ok'} ({invariant.says})")
        lines += [f"  {violation.subject}: {violation.detail}" for violation in mine[:shown]]
        if len(mine) > shown:
            lines.append(f"  ... and {len(mine) - shown} more")
    lines.append(f"violations: {len(violations)}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cluster.invariants", description=__doc__)
    parser.add_argument("--database-url", help="the ledger's SQLAlchemy URL (default: ACS_DATABASE_URL)")
    args = parser.parse_args(argv)
    settings = get_settings()
    violations = check_database(args.database_url or settings.ledger_url(),
                                default_allowance=settings.monthly_allowance)
    print(report(violations))
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
