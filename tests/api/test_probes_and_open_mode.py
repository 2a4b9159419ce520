"""Health probes, a bad environment value at start-up, and the one-command demo."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx2
import pytest
from django.test import Client

from routing.config.runtime import runtime
from routing.core.table import RoutingTable
from tests.gateway_process import free_port, run_gateway

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def test_health_and_readiness(client: Client) -> None:
    runtime.swap(RoutingTable(version=3))
    assert client.get("/health").json() == {"status": "ok"}
    ready = client.get("/health/ready")
    assert ready.status_code == 200
    assert ready.json()["checks"]["config"] == "version 3"


def test_a_gateway_without_its_database_is_alive_but_not_ready_and_does_not_say_where_the_database_is(
        tmp_path: Path) -> None:
    port = free_port()
    dead = f"postgres://dbowner-name@127.0.0.1:{port}/secret_db_name"
    with run_gateway(tmp_path, {"DATABASE_URL": dead}, ready_timeout=60, ready_path="/health") as gateway:
        ready = httpx2.get(f"{gateway.base_url}/health/ready", timeout=30)
        assert ready.status_code == 503
        checks = ready.json()["checks"]
        assert checks["config"] == "not loaded"
        assert checks["database"] == "unreachable (OperationalError)"
        assert checks["config_reload"].startswith("failing (OperationalError)")
        for detail in (str(port), "127.0.0.1", "dbowner-name", "secret_db_name", "connection"):
            assert detail not in ready.text
        # The operator finds the detail in the gateway's log.
        assert wait_for(lambda: "readiness: the database is unreachable (OperationalError)" in gateway.log())
    assert "cannot reload the routing table" in gateway.log()
    assert str(port) in gateway.log()


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_bad_environment_value_stops_start_up_naming_the_variable() -> None:
    done = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "DJANGO_SECRET_KEY": "test-only-" + "x" * 40,
                               "PRO_ROUTING_MIN_WEIGHT_FRACTION": "0.9"})
    assert done.returncode != 0
    assert "PRO_ROUTING_MIN_WEIGHT_FRACTION: must be at most 0.5" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_demo_answers_a_chat_and_a_stream(tmp_path: Path) -> None:
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": f"sqlite:///{tmp_path}/demo.sqlite3",
           "AUDIT_SPOOL_DIR": str(tmp_path / "spool")}
    done = subprocess.run([sys.executable, "manage.py", "demo", "--check", "--port", str(port),
                           "--simulator-port", "0"], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "demo check passed" in done.stdout
    assert "stream" in done.stdout
    assert "GOMODEL_AUTH=open" in done.stderr  # served without a key, and said so loudly
