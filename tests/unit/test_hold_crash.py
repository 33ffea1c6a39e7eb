"""kill -9 of a process that holds live Holds: once their lease runs out,
the next process releases them, and the User's tokens are whole again."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

from domain.budget import TokenLedger
from ledger.store.db import make_engine, session_factory
from ledger.tokens.grants import grant, set_allowance, standing
from ledger.accounts.keys import create_api_key, create_user
from tests.conftest import fresh_postgres

LEASE_S = 2.0

VICTIM = textwrap.dedent("""
    import asyncio, sys, uuid
    from domain.budget import TokenLedger
    from ledger.store.db import make_engine, session_factory
    from ledger.tokens.holds import HoldAsk

    async def main(url, user_id, key_id):
        engine = make_engine(url)
        sessions = session_factory(engine)
        ledger = TokenLedger(sessions, session_factory(engine), request_url="x", default_allowance=0,
                             owner="victim", lease_s=float(sys.argv[4]))
        for budget_hold in (False, True):
            ask = HoldAsk(user_id=uuid.UUID(user_id), key_id=uuid.UUID(key_id), model="tiny-llama",
                          prompt_tokens=4, choices=1, max_tokens=100 if budget_hold else 20, may_lower=False)
            await ledger.hold(ask)
        print("held", flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main(*sys.argv[1:4]))
""")


async def _user(sessions: Any) -> tuple[Any, Any]:
    async with sessions() as session:
        user = await create_user(session, "crash")
        key, _ = await create_api_key(session, user.id, "k")
        await session.commit()
    async with sessions() as session:
        await set_allowance(session, user.id, 50)
    async with sessions() as session:
        await grant(session, user.id, 1000)
    return user.id, key.id


async def test_a_killed_process_leaves_no_hold_behind() -> None:
    url = await fresh_postgres("acs_test_crash")
    engine = make_engine(url)
    sessions = session_factory(engine)
    try:
        user_id, key_id = await _user(sessions)
        victim = subprocess.Popen([sys.executable, "-c", VICTIM, url, str(user_id), str(key_id), str(LEASE_S)],
                                  stdout=subprocess.PIPE, text=True, cwd=os.getcwd())
        assert victim.stdout.readline().strip() == "held"
        async with sessions() as session:
            during = await standing(session, user_id, key_id)
        # 24 from the allowance, 104 from the Budget: never split.
        assert (during.allowance_used, during.budget) == (24, 1000 - 104)
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()
        time.sleep(LEASE_S + 0.5)
        restarted = TokenLedger(sessions, sessions, request_url="x", default_allowance=0, lease_s=LEASE_S)
        assert await restarted.leases.reconcile() == 2
        async with sessions() as session:
            after = await standing(session, user_id, key_id)
        assert (after.allowance_used, after.budget) == (0, 1000)
    finally:
        await engine.dispose()


async def test_a_live_process_keeps_its_holds() -> None:
    """The leases of a process that still runs are renewed, never released."""
    url = await fresh_postgres("acs_test_live")
    engine = make_engine(url)
    sessions = session_factory(engine)
    try:
        user_id, key_id = await _user(sessions)
        from ledger.tokens.holds import HoldAsk

        ledger = TokenLedger(sessions, sessions, request_url="x", default_allowance=0, lease_s=LEASE_S)
        await ledger.hold(HoldAsk(user_id=user_id, key_id=key_id, model="m", prompt_tokens=4, choices=1,
                                  max_tokens=5, may_lower=False))
        for _ in range(3):
            await asyncio.sleep(LEASE_S / 2)
            assert await ledger.leases.reconcile() == 0
    finally:
        await engine.dispose()
