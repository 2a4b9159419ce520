"""The one-command demo runs the production server, so it refuses what production refuses: a header section
larger than the HTTP/1 buffer is a 431, never read into the gateway."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.gateway_process import ROOT, free_port


def _status_of(port: int, header_bytes: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * header_bytes + b"\r\n\r\n")
        return conn.recv(64).split(b"\r\n", 1)[0]


def test_the_demo_refuses_an_oversized_header_section_like_production(tmp_path: Path) -> None:
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": f"sqlite:///{tmp_path}/demo.sqlite3",
           "AUDIT_SPOOL_DIR": str(tmp_path / "spool")}
    log = tmp_path / "demo.log"
    with log.open("wb") as out:
        demo = subprocess.Popen([sys.executable, "manage.py", "demo", "--port", str(port), "--simulator-port", "0"],
                                cwd=ROOT, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        give_up = time.monotonic() + 120
        while True:
            assert demo.poll() is None, log.read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/ready", timeout=2) as ready:
                    if ready.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < give_up, "the demo did not become ready"
            time.sleep(0.5)
        assert _status_of(port, 1_000) == b"HTTP/1.1 200 OK"
        assert _status_of(port, 1_000_000).startswith(b"HTTP/1.1 431")
    finally:
        demo.send_signal(signal.SIGINT)
        try:
            demo.wait(timeout=20)
        except subprocess.TimeoutExpired:
            demo.kill()
            demo.wait()
