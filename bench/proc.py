"""Reading /proc, for the benches' CPU figures."""
from __future__ import annotations

from pathlib import Path


def proc_stat_fields(pid: int | str) -> list[str] | None:
    """/proc/PID/stat from the state field on (the command name may hold spaces)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2:].split()
