"""Real processes for the audit fault tests: a private Redis, a private PostgreSQL cluster, a RabbitMQ vhost,
a Celery worker and publishing "gateway" processes. Each is started and stopped by the test that owns it;
the machine's shared services are never stopped.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, TextIO

from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
PG_BIN = Path("/usr/lib/postgresql")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.3)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL's server tools refuse to run as root: run them as the postgres user then."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *command]
    return command


def _pg_tool(name: str) -> str:
    versions = sorted(PG_BIN.glob("*/bin/" + name))
    if not versions:
        raise RuntimeError(f"PostgreSQL server tools not found under {PG_BIN} (apt-get install postgresql)")
    return str(versions[-1])


class PrivateRedis:
    """A redis-server on its own port that persists every write (AOF, fsync always), so a stop loses nothing."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
             "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--logfile", "redis.log"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: port_open(self.port), 15, "the private redis to listen")

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.send_signal(signal.SIGTERM)  # redis saves and fsyncs on SIGTERM
        self.process.wait(20)
        self.process = None


class PrivatePostgres:
    """A throw-away PostgreSQL cluster on its own port that a test may stop and start at will."""

    def __init__(self) -> None:
        # Outside pytest's private tmp: the postgres user must be able to reach it.
        self.directory = Path(tempfile.mkdtemp(prefix="gomodel-audit-pg-"))
        self.data = self.directory / "data"
        self.port = free_port()

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def init(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres", "postgres")
        subprocess.run(_as_postgres([_pg_tool("initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
                                     "--no-sync"]), check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        subprocess.run(_as_postgres([_pg_tool("pg_ctl"), "-D", str(self.data), "-o", options,
                                     "-l", str(self.directory / "server.log"), "-w", "-t", "60", "start"]),
                       check=True, capture_output=True, timeout=90)

    def stop(self) -> None:
        subprocess.run(_as_postgres([_pg_tool("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"]),
                       check=False, capture_output=True, timeout=90)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


class RabbitVhost:
    """A RabbitMQ virtual host of its own on the machine's broker (queues isolated from every other user)."""

    def __init__(self) -> None:
        self.name = f"gomodel-audit-{os.getpid()}-{uuid.uuid4().hex[:6]}"

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:5672/{self.name}"

    def create(self) -> None:
        subprocess.run(["rabbitmqctl", "-q", "add_vhost", self.name], check=True, capture_output=True, timeout=60)
        subprocess.run(["rabbitmqctl", "-q", "set_permissions", "-p", self.name, "guest", ".*", ".*", ".*"],
                       check=True, capture_output=True, timeout=60)

    def delete(self) -> None:
        subprocess.run(["rabbitmqctl", "-q", "delete_vhost", self.name], check=False, capture_output=True,
                       timeout=60)


def process_env(**overrides: str) -> dict[str, str]:
    """The environment for a child process: this one's, plus the settings module in use and ``overrides``."""
    from django.conf import settings

    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = settings.SETTINGS_MODULE
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(overrides)
    return env


class Worker:
    """``celery -A gomodel_site worker`` (prefork, one child) in its own process group."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.env = env
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self._log: TextIO | None = None

    def start(self) -> None:
        self._log = open(self.log_path, "a")  # noqa: SIM115 - closed in stop/kill
        self._log.write(f"--- worker start {time.strftime('%H:%M:%S')}\n")
        self._log.flush()
        offset = self.log_path.stat().st_size
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "gomodel_site", "worker", "-P", "prefork", "-c", "1",
             "-n", f"audit-test-{uuid.uuid4().hex[:8]}@%h", "--without-gossip", "--without-mingle",
             "--loglevel", "INFO"],
            cwd=REPO, env=self.env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        wait_for(lambda: b" ready." in self.log_path.read_bytes()[offset:] or self.process.poll() is not None,
                 60, "the celery worker to be ready")
        if self.process.poll() is not None:
            raise AssertionError(f"the worker exited: {self.log_path.read_text()[-3000:]}")

    def children(self) -> list[int]:
        """The pids of the worker's pool processes."""
        assert self.process is not None
        found = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.process.pid:
                found.append(int(stat.parent.name))
        return found

    def kill(self) -> None:
        """SIGKILL the whole worker: master and pool children, no clean-up of any kind."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(20)
        self._finish()

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self._finish()

    def _finish(self) -> None:
        self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None


class Gateway:
    """A publishing process (tests/audit/publish_load.py) standing in for a gateway worker process."""

    def __init__(self, env: dict[str, str], log_path: Path, *, prefix: str, count: int, rate: float,
                 progress: Path | None = None, hold: bool = False) -> None:
        command = [sys.executable, "-m", "tests.audit.publish_load", "--prefix", prefix, "--count", str(count),
                   "--rate", str(rate)]
        if progress is not None:
            command += ["--progress", str(progress)]
        if hold:
            command.append("--hold")
        self.progress = progress
        self.log_path = log_path
        self.lines: list[str] = []
        with open(log_path, "a") as log:
            self.process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=log,
                                            text=True, start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        with self.process.stdout:
            for line in self.process.stdout:
                self.lines.append(line.strip())

    def _wait_line(self, prefix: str, timeout: float) -> str:
        def found() -> str | None:
            for line in self.lines:
                if line.startswith(prefix):
                    return line
            if self.process.poll() is not None and not self._reader.is_alive():
                raise AssertionError(f"the gateway process exited: {self.log_path.read_text()[-3000:]}")
            return None

        return str(wait_for(found, timeout, f"the gateway process to print {prefix!r}"))

    def wait_started(self, timeout: float = 30) -> None:
        self._wait_line("started", timeout)

    def wait_published(self, timeout: float) -> None:
        self._wait_line("published", timeout)

    def finish(self, timeout: float) -> dict[str, Any]:
        """Wait for a normal exit; the publisher's counters it printed."""
        self.process.wait(timeout)
        self._reader.join(5)
        if self.process.returncode != 0:
            raise AssertionError(f"the gateway process failed ({self.process.returncode}): "
                                 f"{self.log_path.read_text()[-3000:]}")
        return dict(json.loads(self.lines[-1]))

    def last_index(self) -> int:
        """The index of the last event handed to publish (written just before the call)."""
        assert self.progress is not None
        return int.from_bytes(self.progress.read_bytes()[:8], "little")

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)
        self.process.wait(60)
        self._reader.join(10)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._reader.join(10)
