"""`python -m cluster.admin ...`: the operator's command line (`--help` lists it).

The entry reads the settings (api/settings.py: ACS_DATABASE_URL,
ACS_MONTHLY_ALLOWANCE, ACS_JOB_RESULT_KEPT_S) and runs the commands of
ledger/admin.py with them, so that the ledger reads no settings itself.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import timedelta

from api.settings import Settings, get_settings
from ledger import admin


def admin_config(settings: Settings) -> admin.AdminConfig:
    return admin.AdminConfig(
        database_url=settings.ledger_url(),
        monthly_allowance=settings.monthly_allowance,
        job_result_kept=timedelta(seconds=settings.job_result_kept_s),
    )


def main(argv: Sequence[str] | None = None) -> int:
    return admin.main(argv, admin_config(get_settings()))


if __name__ == "__main__":
    sys.exit(main())
