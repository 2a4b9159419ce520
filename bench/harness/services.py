"""Start and stop what is measured: the database, the provider simulator, the gateway, the Celery worker.

Every process runs in its own session (process group), its output goes to a log file in the run's work
directory, and stopping it signals that group only: the harness never touches processes it did not start.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness import procfs

REPO = Path(__file__).resolve().parents[2]
BENCH_DIR = REPO / "bench"
VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_status(url: str, timeout: float = 2.0) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return None


class Service:
    """One started process (and its children), with its log file."""

    def __init__(self, name: str, argv: Sequence[str], *, env: Mapping[str, str], log_dir: Path) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - kept open for the process's life, closed in stop()
        self.process = subprocess.Popen(self.argv, cwd=REPO, env=dict(env), stdout=self._log,
                                        stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.process.pid

    def all_pids(self) -> list[int]:
        """The process and everything below it."""
        return [self.pid, *procfs.descendants(self.pid)]

    def children(self) -> list[int]:
        """The processes below this one: for granian, its worker processes."""
        return procfs.descendants(self.pid)

    def wait_until(self, url: str, timeout: float = 60.0) -> None:
        """Return once ``url`` answers 200; raise with the log's tail if the process dies or time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{self.log_tail()}")
            if http_status(url) == 200:
                return
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} did not answer {url} within {timeout:.0f}s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 15.0) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGTERM)  # our own process group (start_new_session)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.pid, signal.SIGKILL)
                self.process.wait(timeout)
        self._log.close()


def bench_database_url(name: str) -> str:
    return f"postgres://postgres@127.0.0.1:5432/{name}"


def recreate_database(name: str) -> None:
    """Drop and create the benchmark's own database (PostgreSQL on 127.0.0.1, trust auth)."""
    import psycopg

    with psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def manage(args: Sequence[str], env: Mapping[str, str]) -> str:
    """Run ``manage.py`` with ``args``; raise with its output when it fails."""
    completed = subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=dict(env),
                               capture_output=True, text=True, check=False, timeout=300)
    if completed.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{completed.stdout}\n{completed.stderr}")
    return completed.stdout + completed.stderr


def gateway_environment(*, database_url: str, work_dir: Path, broker_url: str | None,
                        redis_url: str | None) -> dict[str, str]:
    """The gateway's environment as production sets it, minus what the caller's shell may carry."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"CELERY_BROKER_URL", "REDIS_URL", "GOMODEL_CONFIG", "GOMODEL_MASTER_KEY",
                        "DJANGO_SETTINGS_MODULE", "PROMETHEUS_MULTIPROC_DIR", "DATABASE_URL"}}
    metrics_dir = work_dir / ("prometheus-broker" if broker_url else "prometheus")
    metrics_dir.mkdir(parents=True, exist_ok=True)
    for stale in metrics_dir.glob("*.db"):
        stale.unlink()
    env.update({
        "DATABASE_URL": database_url,
        "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
        "AUDIT_SPOOL_DIR": str(work_dir / "audit-spool"),
        "GOMODEL_LOG_LEVEL": "warning",
        "DJANGO_SECRET_KEY": "bench-only-secret-key-not-for-production-0123456789",
        "BENCH_SIM_KEY": "sk-bench-simulator",
        "GOMODEL_AUTH": "open",  # the load generators call from loopback without a key
    })
    if broker_url:
        env["CELERY_BROKER_URL"] = broker_url
    if redis_url:
        env["REDIS_URL"] = redis_url
    return env


def start_simulator(port: int, config_path: Path, *, server: str, log_dir: Path) -> Service:
    """The provider simulator; ``server`` is ``granian`` (one worker, Rust HTTP) or ``uvicorn`` (its own CLI)."""
    env = dict(os.environ)
    if server == "granian":
        env["BENCH_SIM_CONFIG"] = str(config_path)
        env["PYTHONPATH"] = os.pathsep.join([str(BENCH_DIR), str(REPO)])
        argv = [str(VENV_BIN / "granian"), "--interface", "asgi", "--workers", "1", "--host", "127.0.0.1",
                "--port", str(port), "--log-level", "warning", "--backlog", "4096", "--backpressure", "4096",
                "harness.sim_asgi:app"]
    else:
        argv = [sys.executable, "-m", "routing.simulator", "--host", "127.0.0.1", "--port", str(port),
                "--config", str(config_path)]
    service = Service("simulator", argv, env=env, log_dir=log_dir)
    service.wait_until(f"http://127.0.0.1:{port}/health")
    return service


# As in the README's production command: granian's default backpressure (backlog / workers = 512 requests in
# flight per worker) would queue some of 1,000 concurrent streams behind the others.
PRODUCTION_SERVER_ARGS = ("--backpressure", "2000")


def start_gateway(port: int, env: Mapping[str, str], *, app: str, workers: int, extra_args: Sequence[str],
                  log_dir: Path, name: str = "gateway") -> Service:
    """The gateway as the README's production set-up runs it: granian, ``--interface asgi`` (ASGI with
    the lifespan protocol), ``workers`` processes; returns once ``/health/ready`` answers and they all run."""
    argv = [str(VENV_BIN / "granian"), "--interface", "asgi", "--workers", str(workers), "--host", "127.0.0.1",
            "--port", str(port), "--log-level", "warning", *PRODUCTION_SERVER_ARGS, *extra_args, app]
    service = Service(name, argv, env=env, log_dir=log_dir)
    service.wait_until(f"http://127.0.0.1:{port}/health/ready", timeout=90)
    deadline = time.monotonic() + 30
    while len(service.children()) < workers and time.monotonic() < deadline:
        time.sleep(0.2)
    return service


def start_celery_worker(env: Mapping[str, str], *, log_dir: Path) -> Service:
    argv = [str(VENV_BIN / "celery"), "-A", "gomodel_site", "worker", "--concurrency", "1", "--loglevel", "warning",
            "--without-gossip", "--without-mingle", "-n", f"bench-{os.getpid()}@%h"]
    service = Service("celery-worker", argv, env=env, log_dir=log_dir)
    time.sleep(3)  # the worker connects in the background; the publisher spools until it does
    if service.process.poll() is not None:
        raise RuntimeError(f"the Celery worker exited:\n{service.log_tail()}")
    return service
