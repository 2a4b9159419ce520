"""Health probes, a bad environment value at start-up, and the one-command demo."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from django.test import Client

from routing.config.runtime import runtime
from routing.core.table import RoutingTable
from tests.gateway_process import free_port, run_gateway
from tests.waiting import wait_for

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
        wait_for(lambda: "readiness: the database is unreachable (OperationalError)" in gateway.log(), 10,
                 "the readiness failure in the log")
    assert "cannot reload the routing table" in gateway.log()
    assert str(port) in gateway.log()


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


def test_the_demos_createkey_hint_creates_a_key_the_running_demo_checks(tmp_path: Path) -> None:
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": f"sqlite:///{tmp_path}/demo.sqlite3",
           "AUDIT_SPOOL_DIR": str(tmp_path / "spool"), "PYTHONUNBUFFERED": "1"}
    out = tmp_path / "demo.out"
    with open(out, "wb") as log:
        demo = subprocess.Popen([sys.executable, "manage.py", "demo", "--port", str(port), "--simulator-port", "0"],
                                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: "Press Ctrl-C" in out.read_text() or demo.poll() is not None, 180,
                 "the demo to print its banner (or exit)")
        banner = out.read_text()
        hint = re.search(r"^  (.*createkey my-app)$", banner, re.M)
        assert hint is not None, banner
        assert f"DATABASE_URL=sqlite:////{str(tmp_path).lstrip('/')}/demo.sqlite3 " in hint.group(1)
        base = f"http://127.0.0.1:{port}"
        wrong = httpx2.get(f"{base}/v1/models", headers={"Authorization": "Bearer sk-wrong"}, timeout=10)
        assert wrong.status_code == 200
        assert wrong.headers["x-gomodel-auth"] == "open"  # served, and it says the key was not checked
        # As typed into another terminal: none of the demo's environment, no DJANGO_SECRET_KEY.
        created = subprocess.run(["bash", "-c", hint.group(1)], cwd=tmp_path, env={"PATH": "/usr/bin:/bin"},
                                 capture_output=True, text=True, timeout=120, check=False)
        assert created.returncode == 0, created.stdout + created.stderr
        secret = created.stdout.strip()
        assert secret.startswith("gm-")

        def checked() -> bool:
            answer = httpx2.get(f"{base}/v1/models", headers={"Authorization": f"Bearer {secret}"}, timeout=10)
            return answer.status_code == 200 and "x-gomodel-auth" not in answer.headers

        wait_for(checked, 20, "the new key to be checked")  # the running demo reloads its keys and checks this one
    finally:
        demo.send_signal(signal.SIGINT)
        try:
            demo.wait(timeout=30)
        except subprocess.TimeoutExpired:
            demo.kill()
            demo.wait()
