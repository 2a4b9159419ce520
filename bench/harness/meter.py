"""What one load run cost, by group of processes: CPU seconds and memory, plus what everyone else used.

A group is a name and a function returning its current pids (the gateway's workers, the simulator, the
PostgreSQL backends of the benchmark database, the Celery worker). The machine-wide busy time from
/proc/stat, minus the groups and the load generator, is what other programs on the machine used during the
run: on a shared 2-core box that is the noise to read the wall-clock numbers against.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from harness import procfs

PidSource = Callable[[], list[int]]


@dataclass
class Usage:
    """CPU seconds per group between two moments, the machine's busy share, and the groups' memory at the end."""

    cpu_s: dict[str, float]
    wall_s: float
    machine_busy_s: float
    machine_total_s: float
    rss_bytes: dict[str, list[int]] = field(default_factory=dict)
    pids_changed: list[str] = field(default_factory=list)

    def others_cpu_s(self, generator_cpu_s: float) -> float:
        return max(0.0, self.machine_busy_s - sum(self.cpu_s.values()) - generator_cpu_s)


class Meter:
    def __init__(self, groups: dict[str, PidSource]) -> None:
        self.groups = groups

    def start(self) -> _Running:
        pids = {name: source() for name, source in self.groups.items()}
        snapshots = {name: procfs.CpuSnapshot.of(p) for name, p in pids.items()}
        busy, total = procfs.machine_busy_seconds()
        return _Running(self, pids, snapshots, busy, total, time.monotonic())


@dataclass
class _Running:
    meter: Meter
    pids: dict[str, list[int]]
    snapshots: dict[str, procfs.CpuSnapshot]
    busy: float
    total: float
    started: float

    def stop(self) -> Usage:
        wall = time.monotonic() - self.started
        busy, total = procfs.machine_busy_seconds()
        cpu: dict[str, float] = {}
        rss: dict[str, list[int]] = {}
        changed = []
        for name, source in self.meter.groups.items():
            pids = source()
            # Processes that were there at the start and still are, plus newcomers counted from zero.
            cpu[name] = round(procfs.CpuSnapshot.of(pids).spent_since(self.snapshots[name]), 3)
            rss[name] = [procfs.rss_bytes(pid) for pid in pids]
            if set(self.pids[name]) - set(pids):
                changed.append(name)
        return Usage(cpu_s=cpu, wall_s=round(wall, 3), machine_busy_s=round(busy - self.busy, 3),
                     machine_total_s=round(total - self.total, 3), rss_bytes=rss, pids_changed=changed)
