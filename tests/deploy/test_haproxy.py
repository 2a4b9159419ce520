"""deploy/haproxy/haproxy.cfg: HAProxy itself (Debian's package) says it is valid, and it checks the
gateways on /health/ready and leaves a stopping replica's requests to finish."""

from __future__ import annotations

import shutil
import subprocess

from tests.gateway_process import ROOT

CONFIG = ROOT / "deploy" / "haproxy" / "haproxy.cfg"


def test_haproxy_accepts_the_configuration() -> None:
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"  # installed by tests/machine.py when missing
    done = subprocess.run([haproxy, "-c", "-f", str(CONFIG)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Configuration file is valid" in done.stdout + done.stderr


def test_it_checks_readiness_and_drains_instead_of_cutting() -> None:
    lines = [line.split("#", 1)[0].strip() for line in CONFIG.read_text().splitlines()]
    lines = [line for line in lines if line]
    assert "http-check send meth GET uri /health/ready ver HTTP/1.1 hdr Host localhost" in lines
    assert "http-check expect status 200" in lines
    assert any(line.startswith("default-server check ") for line in lines)
    # A server marked down keeps its established requests: they finish within the gateway's grace.
    assert not any("shutdown-sessions" in line for line in lines)
    # Only a connection that never reached a gateway is tried again elsewhere: a request is never run twice.
    assert "retry-on conn-failure" in lines
    assert "server-template gw 10 gateway:8000" in lines
