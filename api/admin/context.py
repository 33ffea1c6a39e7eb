"""What an admin route works with: the ledger's sessions and the operations' Platform."""
from __future__ import annotations

from typing import Any

from fastapi import Request

from api.auth import services_of
from domain.operations.platform import Platform, platform_of_services


def platform(request: Request) -> Platform:
    return platform_of_services(services_of(request))


def reads(request: Request) -> Any:
    return services_of(request).sessions()


def writes(request: Request) -> Any:
    # On SQLite these take the write lock at BEGIN, as the money changes need.
    return services_of(request).ledger.write_sessions()
