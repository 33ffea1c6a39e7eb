"""The in-process API bench: its Server-Timing parse, and its sessions arm, which must put the
drivers' paths back however its block ends."""
import pytest

from bench.api_cpu import arm, stages_of
from ledger.store import driver_sql
from ledger.store import sqlite_driver


def test_a_server_timing_header_gives_each_stage_its_milliseconds() -> None:
    assert stages_of("auth;dur=1.17, hold;dur=2.25, total;dur=9.39") == {"auth": 1.17, "hold": 2.25, "total": 9.39}


def test_the_sessions_arm_turns_the_drivers_off_for_its_block_only() -> None:
    shipped = driver_sql.drives, sqlite_driver.drives
    with arm("drivers"):
        assert (driver_sql.drives, sqlite_driver.drives) == shipped
    with pytest.raises(RuntimeError):
        with arm("sessions"):
            assert driver_sql.drives(object()) is False and sqlite_driver.drives(object()) is False
            raise RuntimeError("a block that failed")
    assert (driver_sql.drives, sqlite_driver.drives) == shipped
