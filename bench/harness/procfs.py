"""CPU time and memory of processes, read from /proc (Linux only).

CPU time is what a process spent on a core (utime + stime), so it measures the cost of the work even when
other programs compete for the two cores; wall-clock rates do not. All CPU figures are in seconds.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name, or None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read().decode("latin-1")
    except OSError:
        return None
    # The command name is in parentheses and may itself contain spaces or parentheses.
    return raw[raw.rfind(")") + 2:].split()


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process in seconds (0 when it is gone)."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # stat fields 14 and 15


def rss_bytes(pid: int) -> int:
    """Resident set size of one process (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as handle:
            return int(handle.read().split()[1]) * PAGE_BYTES
    except (OSError, IndexError, ValueError):
        return 0


def parent_map() -> dict[int, int]:
    """pid -> parent pid for every process on the machine."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None:
                parents[int(entry)] = int(fields[1])
    return parents


def descendants(root: int, parents: dict[int, int] | None = None) -> list[int]:
    """Every process below ``root`` (children, grandchildren...), not ``root`` itself."""
    parents = parent_map() if parents is None else parents
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found: list[int] = []
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return sorted(found)


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def pids_matching(text: str) -> list[int]:
    """Processes whose command line contains ``text`` (e.g. the PostgreSQL backends of one database)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and text in cmdline(int(entry)):
            found.append(int(entry))
    return sorted(found)


def machine_busy_seconds() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, summed over cores, from /proc/stat."""
    with open("/proc/stat") as handle:
        values = [int(v) for v in handle.readline().split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    total = sum(values[:8])  # user nice system idle iowait irq softirq steal
    return (total - idle) / CLOCK_TICKS, total / CLOCK_TICKS


def load_average() -> tuple[float, float, float]:
    one, five, fifteen = os.getloadavg()
    return round(one, 2), round(five, 2), round(fifteen, 2)


@dataclass(frozen=True)
class CpuSnapshot:
    """CPU seconds per process at one moment; subtracting two gives what each group spent in between."""

    per_pid: dict[int, float]

    @classmethod
    def of(cls, pids: Iterable[int]) -> CpuSnapshot:
        return cls({pid: cpu_seconds(pid) for pid in pids})

    def spent_since(self, earlier: CpuSnapshot) -> float:
        """CPU seconds spent between ``earlier`` and this snapshot by the processes of both.

        A process that started in between counts from zero; one that ended in between is lost, which
        is why the harness notices when a gateway worker's pid changes.
        """
        return sum(max(0.0, cpu - earlier.per_pid.get(pid, 0.0)) for pid, cpu in self.per_pid.items())
