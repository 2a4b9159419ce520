"""Run the gateway as a real ASGI server in a subprocess, against the test database."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx2
from django.conf import settings

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_database_url() -> str:
    db = settings.DATABASES["default"]
    user = db.get("USER") or "postgres"
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or "5432"
    return f"postgres://{user}@{host}:{port}/{db['NAME']}"


@dataclass
class Gateway:
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@contextlib.contextmanager
def run_gateway(
    tmp_path: Path, env: Mapping[str, str] | None = None, *, port: int | None = None, server: str = "uvicorn",
    ready_timeout: float = 30.0, ready_path: str = "/health/ready",
) -> Iterator[Gateway]:
    """A gateway process on a free port; waits for /health and stops it afterwards.

    Access is the production default (``GOMODEL_AUTH=keys``) unless ``env`` says ``GOMODEL_AUTH=open``.
    """
    port = port or free_port()
    full_env = dict(os.environ)
    full_env.pop("GOMODEL_AUTH", None)
    full_env.update({
        "DATABASE_URL": test_database_url(),
        "DJANGO_SETTINGS_MODULE": "gomodel_site.settings",
        "GOMODEL_CONFIG_POLL_SECONDS": "0.2",
        "AUDIT_SPOOL_DIR": str(tmp_path / f"spool-{port}"),
        "PYTHONUNBUFFERED": "1",
    })
    full_env.update(env or {})
    if server == "granian":
        command = [sys.executable, "-m", "granian", "--interface", "asgi", "--host", "127.0.0.1",
                   "--port", str(port), "--workers", "2", "--log-level", "warning", "gomodel_site.asgi:application"]
    else:
        command = [sys.executable, "-m", "uvicorn", "gomodel_site.asgi:application", "--host", "127.0.0.1",
                   "--port", str(port), "--log-level", "warning", "--no-access-log", "--lifespan", "on"]
    log_path = tmp_path / f"gateway-{port}.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT)
    gateway = Gateway(port=port, process=process, log_path=log_path)
    try:
        deadline = time.monotonic() + ready_timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the gateway exited with {process.returncode}:\n{gateway.log()}")
            try:
                if httpx2.get(f"{gateway.base_url}{ready_path}", timeout=1).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the gateway did not become ready:\n{gateway.log()}")
            time.sleep(0.1)
        yield gateway
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
