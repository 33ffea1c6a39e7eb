"""`python -m cluster.migrate`: bring the ledger of the settings (ACS_DATABASE_URL,
else the embedded SQLite file) to the newest migration."""
from __future__ import annotations

import asyncio

from sqlalchemy.engine import make_url

from domain.settings import get_settings
from ledger.store.migrate import upgrade


def main() -> None:
    url = get_settings().ledger_url()
    asyncio.run(upgrade(url))
    print(f"ledger at head: {make_url(url).render_as_string(hide_password=True)}")


if __name__ == "__main__":
    main()
