"""What an admin route works with: the ledger's sessions and the operations' Platform."""
from __future__ import annotations

from typing import Any

from fastapi import Request

from domain.operations.platform_settings import platform_of
from api.auth import services_of
from domain.operations.platform import Platform


def platform(request: Request) -> Platform:
    services = services_of(request)
    # The services' clock: tests hand in their own "now" (a Usage page's today, a change's time).
    return platform_of(services.settings, services.catalog, services.clock)


def reads(request: Request) -> Any:
    return services_of(request).sessions()


def writes(request: Request) -> Any:
    # On SQLite these take the write lock at BEGIN, as the money changes need.
    return services_of(request).ledger.write_sessions()
