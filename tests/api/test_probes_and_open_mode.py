"""Health probes, and the open mode of a gateway without keys (loopback clients only)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from django.test import Client

from routing.config.runtime import runtime
from routing.core.table import RoutingTable
from tests.gateway_process import free_port, run_gateway

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def test_without_keys_only_loopback_clients_are_served(client: Client) -> None:
    runtime.swap(RoutingTable(version=1))
    body = {"model": "anything", "messages": [{"role": "user", "content": "hi"}]}
    remote = client.post("/v1/chat/completions", body, content_type="application/json", REMOTE_ADDR="10.1.2.3")
    assert remote.status_code == 401
    assert "only answers clients on its own machine" in remote.json()["error"]["message"]
    local = client.post("/v1/chat/completions", body, content_type="application/json", REMOTE_ADDR="127.0.0.1")
    assert local.status_code == 404  # past authentication; the model is simply unknown


def test_health_and_readiness(client: Client) -> None:
    runtime.swap(RoutingTable(version=3))
    assert client.get("/health").json() == {"status": "ok"}
    ready = client.get("/health/ready")
    assert ready.status_code == 200 and ready.json()["checks"]["config"] == "version 3"


def test_a_gateway_without_its_database_is_alive_but_not_ready(tmp_path: Path) -> None:
    dead = f"postgres://postgres@127.0.0.1:{free_port()}/nothing"
    with run_gateway(tmp_path, {"DATABASE_URL": dead}, ready_timeout=60, ready_path="/health") as gateway:
        ready = httpx2.get(f"{gateway.base_url}/health/ready", timeout=30)
        assert ready.status_code == 503
        checks = ready.json()["checks"]
        assert checks["config"] == "not loaded" and "OperationalError" in checks["database"]
    assert "cannot reload the routing table" in gateway.log()


def test_a_bad_environment_value_stops_start_up_naming_the_variable() -> None:
    done = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PRO_ROUTING_MIN_WEIGHT_FRACTION": "0.9"})
    assert done.returncode != 0
    assert "PRO_ROUTING_MIN_WEIGHT_FRACTION: must be at most 0.5" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_demo_answers_a_chat_and_a_stream(tmp_path: Path) -> None:
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": f"sqlite:///{tmp_path}/demo.sqlite3",
           "AUDIT_SPOOL_DIR": str(tmp_path / "spool")}
    done = subprocess.run([sys.executable, "manage.py", "demo", "--check", "--port", str(port)], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "demo check passed" in done.stdout and "stream" in done.stdout
