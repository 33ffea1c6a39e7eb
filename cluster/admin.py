"""`python -m cluster.admin ...`: the operator's command line (`--help` lists it).

The entry reads the settings (domain/settings.py: ACS_DATABASE_URL,
ACS_MONTHLY_ALLOWANCE, ACS_JOB_RESULT_KEPT_S, ACS_SPEND_PAUSE_USD; ACS_SMTP_URL and
ACS_PUBLIC_BASE_URL for the mails of approvals and password links) and the
catalog of ACS_PROFILE (the models a warm window may keep Warm, and what a
Warm hour costs), and runs the commands of cluster/admin_cli/commands.py with them, so that
the ledger reads neither itself.
"""
from __future__ import annotations

import getpass
import sys
from collections.abc import Sequence

from domain.mail import mail_base_url, mailer_of
from domain.operations.platform import platform_of
from domain.settings import Settings, get_settings
from deployments.catalog import load_catalog
from cluster.admin_cli import commands as admin


def operator_name() -> str:
    """Who the command line's Locks, Clears and windows are recorded as made by."""
    try:
        return f"{getpass.getuser()} (command line)"
    except (KeyError, OSError):  # no user name in this environment
        return "command line"


def admin_config(settings: Settings) -> admin.AdminConfig:
    platform = platform_of(settings, load_catalog(settings.profile, models_root=settings.models_dir))
    return admin.AdminConfig(
        database_url=settings.ledger_url(),
        monthly_allowance=platform.monthly_allowance,
        job_result_kept=platform.job_result_kept,
        spend_pause_usd=platform.spend_pause_usd,
        replica_hour_usd=platform.replica_hour_usd,
        floors=platform.floors,
        operator=operator_name(),
        mailer=mailer_of(settings),
        public_base_url=mail_base_url(settings),
    )


def main(argv: Sequence[str] | None = None) -> int:
    return admin.main(argv, admin_config(get_settings()))


if __name__ == "__main__":
    sys.exit(main())
