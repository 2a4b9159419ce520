"""The machine the benchmark runs on, and the one limit it raises."""

from __future__ import annotations

import os
import platform
import resource
from typing import Any

from harness.wrk import wrk_version


def raise_file_limit() -> tuple[int, int]:
    """Raise the open-file limit to its hard maximum; children inherit it (1,000 streams need ~3,000 fds)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def machine_info() -> dict[str, Any]:
    model = ""
    with open("/proc/cpuinfo") as handle:
        for line in handle:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as handle:
        mem_kib = int(handle.readline().split()[1])
    import django
    import granian

    return {"cores": os.cpu_count(), "cpu": model, "memory_gib": round(mem_kib / 1024 / 1024, 1),
            "kernel": platform.release(), "python": platform.python_version(), "django": django.get_version(),
            "granian": granian.__version__, "wrk": wrk_version()}
