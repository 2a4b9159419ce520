"""Install the Debian packages the collected tests run as real programs, when the machine lacks them.

The README's test command must work on a fresh Debian machine, so the run installs what it needs instead of
skipping: Chromium for the browser tests (Playwright drives it; it never downloads a browser of its own),
HAProxy for the deploy and cluster tests, wrk and Node.js for the benchmark harness's tests, npm for the
compatibility suite's Node clients, and the servers of PostgreSQL, Redis and RabbitMQ that tests/services.py
starts when they are not listening. A package already present is left alone; without root or apt-get the run
fails with the command that would install it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

# What a collected test needs (its folder under tests/, or "services") -> (program, Debian package) pairs
PROGRAMS = {
    "bench": [("wrk", "wrk"), ("node", "nodejs")],
    "browser": [("/usr/bin/chromium", "chromium")],
    "cluster": [("haproxy", "haproxy")],
    "compat": [("npm", "npm")],  # installs the Node clients; they run on the Node the lockfile pins
    "deploy": [("haproxy", "haproxy")],
    "services": [("pg_ctlcluster", "postgresql"), ("redis-server", "redis-server"),
                 ("rabbitmq-server", "rabbitmq-server")],
}


def _present(program: str) -> bool:
    return Path(program).exists() if program.startswith("/") else shutil.which(program) is not None or \
        Path("/usr/sbin", program).exists()


def missing_packages(folders: Iterable[str]) -> list[str]:
    """The Debian packages that the tests under these folders (``tests/<folder>``, or ``services`` for the tests
    that talk to PostgreSQL, Redis or RabbitMQ) need and the machine lacks."""
    needed = {pair for folder in folders for pair in PROGRAMS.get(folder, ())}
    return sorted({package for program, package in needed if not _present(program)})


def ensure_packages(packages: list[str]) -> None:
    if not packages:
        return
    command = ["apt-get", "install", "-y", "-qq", *packages]
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RuntimeError(f"these tests need Debian packages this machine lacks: {' '.join(command)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, timeout=900)
    subprocess.run(command, check=True, env=env, timeout=1800)
