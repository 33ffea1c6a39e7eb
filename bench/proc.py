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


def cpu_ticks(pid: int | str) -> int | None:
    """utime + stime of one process, in clock ticks (its threads together)."""
    fields = proc_stat_fields(pid)
    return None if fields is None else int(fields[11]) + int(fields[12])


def thread_ticks(pid: int | str) -> dict[str, int]:
    """utime + stime of each thread of one process, by 'tid name'."""
    out: dict[str, int] = {}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.find("(") + 1:stat.rfind(")")]
        fields = stat[stat.rfind(")") + 2:].split()
        out[f"{task.name} {name}"] = int(fields[11]) + int(fields[12])
    return out


def command_line(pid: int | str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""
