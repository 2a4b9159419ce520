"""Two demos on one host: ``manage.py demo --port`` and ``--simulator-port`` (0 picks a free one), each demo's
providers pointed at its own simulator; a bad or taken port is refused naming the option."""

from __future__ import annotations

import re
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.gateway_process import ROOT, free_port


def demo(tmp: Path, *options: str) -> subprocess.Popen[str]:
    tmp.mkdir(exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": f"sqlite:///{tmp}/demo.sqlite3",
           "AUDIT_SPOOL_DIR": str(tmp / "spool")}
    return subprocess.Popen([sys.executable, "manage.py", "demo", *options], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def simulator_url(output: str) -> str:
    found = re.search(r"its simulated providers at (http://127\.0\.0\.1:\d+)", output)
    assert found, output[-2000:]
    return found.group(1)


def test_two_demos_run_side_by_side_each_with_its_own_simulator(tmp_path: Path) -> None:
    runs = [demo(tmp_path / name, "--check", "--port", str(free_port()), "--simulator-port", "0")
            for name in ("one", "two")]
    outputs = [run.communicate(timeout=240) for run in runs]
    for run, (out, err) in zip(runs, outputs, strict=True):
        assert run.returncode == 0, out[-2000:] + err[-2000:]
        assert "demo check passed" in out
    urls = [simulator_url(out) for out, _ in outputs]
    assert len(set(urls)) == 2
    assert all(not url.endswith(":18001") for url in urls)
    for name, url in zip(("one", "two"), urls, strict=True):
        with sqlite3.connect(tmp_path / name / "demo.sqlite3") as db:
            bases = [row[0] for row in db.execute("SELECT base_url FROM routing_provider")]
        assert len(bases) == 5
        assert all(base.startswith(url) for base in bases), (url, bases)


def test_a_given_simulator_port_is_used_and_a_taken_one_is_refused_naming_the_option(tmp_path: Path) -> None:
    chosen = free_port()
    out, err = demo(tmp_path / "chosen", "--check", "--port", str(free_port()),
                    "--simulator-port", str(chosen)).communicate(timeout=240)
    assert simulator_url(out) == f"http://127.0.0.1:{chosen}", err[-2000:]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = demo(tmp_path / "taken", "--check", "--port", str(free_port()), "--simulator-port", str(port))
        out, err = run.communicate(timeout=240)
    assert run.returncode != 0
    assert f"the simulator could not listen on 127.0.0.1:{port}" in err
    assert "--simulator-port 0 picks a free port" in err
    assert "Traceback" not in err


def test_a_port_out_of_range_is_refused_naming_the_option(tmp_path: Path) -> None:
    for option in ("--port", "--simulator-port"):
        run = demo(tmp_path / option.strip("-"), "--check", option, "70000")
        out, err = run.communicate(timeout=120)
        assert run.returncode != 0
        assert f"{option}: 70000 is not a port (0-65535)" in err
