"""Start the services the suite needs (PostgreSQL, Redis, RabbitMQ) when they are not running.

The commands are the ones a Debian machine with the packages installed uses; a service that is already
listening is left alone.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import time

import redis

SERVICES = {
    "postgresql": (5432, lambda: _run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", _pg_version(), "main", "start"])),
    "redis": (6379, lambda: _run([
        "redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "-::1", "--port", "6379", "--save", "",
        "--appendonly", "no", "--dir", "/var/lib/redis", "--logfile", "/var/log/redis/ci.log",
    ])),
    "rabbitmq": (5672, lambda: _run(["rabbitmq-server", "-detached"])),
}


def _pg_version() -> str:
    versions = sorted(glob.glob("/etc/postgresql/*"))
    if not versions:
        raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql)")
    return versions[-1].rsplit("/", 1)[-1]


def _run(command: list[str]) -> None:
    if shutil.which(command[0]) is None:
        raise RuntimeError(f"{command[0]} is not installed")
    subprocess.run(command, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def ensure_service(name: str, timeout: float = 60.0) -> None:
    port, start = SERVICES[name]
    if port_open(port):
        return
    start()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_open(port):
            return
        time.sleep(0.3)
    raise RuntimeError(f"{name} did not start listening on 127.0.0.1:{port}")


def ensure_all() -> None:
    if os.environ.get("GOMODEL_TESTS_WITHOUT_SERVICES"):
        # Set by tests/test_bare_machine.py: proves that a part of the suite needs no service at all.
        raise RuntimeError("this test run needs PostgreSQL, Redis or RabbitMQ, which it was told it would not")
    for name in SERVICES:
        ensure_service(name)


def drop_redis_keys(url: str, prefix: str) -> None:
    """Delete what a test wrote to Redis under its own key prefix."""
    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()
