"""A gateway cluster on this machine, built from real processes only.

- three gateways, each the README's production command (``granian --interface asgi --workers 2 --backpressure
  2000``) on a loopback port of its own, with an audit spool and a metrics directory of its own, as on three hosts;
- HAProxy from Debian's package in front of them, running deploy/haproxy/haproxy.cfg with only what a single
  host changes: the three servers instead of Docker's DNS, loopback ports, a stats socket in the test's directory
  (and each answer names the server that gave it, ``X-Served-By``, so a test knows which replica served it);
- a private PostgreSQL database, a private Redis database, a private RabbitMQ virtual host and a Celery worker
  that stores the audit, as in production;
- the provider simulator in a process of its own.

Every process is started in its own process group and stopped when the ``cluster`` context exits, failure or not.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import redis
import yaml
from prometheus_client.parser import text_string_to_metric_families

from routing.simulator.server import SimulatorProcess, start_simulator_process
from tests.audit.procs import RabbitVhost, Worker, free_port, port_open
from tests.e2e.conftest import fresh_database
from tests.e2e.test_shutdown import ProductionGateway
from tests.gateway_process import ROOT
from tests.waiting import wait_for

DEPLOY_HAPROXY = ROOT / "deploy" / "haproxy" / "haproxy.cfg"
# The Redis database this test owns on the machine's Redis (emptied before and after a run).
REDIS_DB = 4
MASTER_KEY = "gm-cluster-master-key-0123456789abcdefghij"
SIM_KEY = "sim-key-for-the-cluster-tests"
SIM_MODELS: dict[str, Any] = {
    "steady": {"latency_ms": 60},
    "locked": {"latency_ms": 5},
    "spare": {"latency_ms": 5},
    "pricey": {"latency_ms": 150, "reply_tokens": 40},
    "metered": {"latency_ms": 100},
}
METERED_RPM = 3  # the provider's own requests per minute on `sim/metered`, shared by every replica
# USD per 1M tokens: one `pricey` answer costs about a cent, so a one-dollar budget lasts ~100 requests.
PRICEY_PRICE = 150.0


def gateway_config(sim_url: str) -> dict[str, Any]:
    provider = {"name": "sim", "kind": "openai", "base_url": f"{sim_url}/v1", "api_key": "${CLUSTER_SIM_KEY}"}
    return {
        "providers": [provider],
        "models": [
            {"provider": "sim", "upstream": "steady", "capabilities": ["text"]},
            {"provider": "sim", "upstream": "locked", "capabilities": ["text"]},
            {"provider": "sim", "upstream": "spare", "capabilities": ["text"]},
            {"provider": "sim", "upstream": "pricey", "input_price": PRICEY_PRICE, "output_price": PRICEY_PRICE,
             "capabilities": ["text"]},
            {"provider": "sim", "upstream": "metered", "rpm": METERED_RPM, "capabilities": ["text"]},
        ],
        # In order: `locked` gets every request unless a replica knows it is locked out.
        "virtual_models": [
            {"source": "guarded", "strategy": "failover", "targets": [{"model": "sim/locked"}, {"model": "sim/spare"}]},
        ],
    }


class Replica(ProductionGateway):
    """One gateway host: the production command, its own spool, an empty metrics directory at every start."""

    def __init__(self, name: str, tmp: Path, env: dict[str, str]) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.metrics_dir = tmp / "metrics"
        super().__init__(tmp, {**env, "AUDIT_SPOOL_DIR": str(tmp / "spool"),
                               "PROMETHEUS_MULTIPROC_DIR": str(self.metrics_dir)})

    def launch(self) -> None:
        shutil.rmtree(self.metrics_dir, ignore_errors=True)
        self.metrics_dir.mkdir()
        super().launch()

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def config_version(self) -> str | None:
        """The routing table version /health/ready reports (``version N``), or None when not ready."""
        answer = asyncio.run(request(self.port, "GET", "/health/ready"))
        if answer.status != 200:
            return None
        return str(answer.json()["checks"]["config"])


class LoadBalancer:
    """HAProxy (Debian's package) on deploy/haproxy/haproxy.cfg, pointed at the replicas on loopback."""

    BACKEND = "gateways"

    def __init__(self, tmp: Path, replicas: list[Replica]) -> None:
        self.port = free_port()
        self.stats_port = free_port()
        self.socket_path = tmp / "haproxy.sock"
        self.config_path = tmp / "haproxy.cfg"
        self.log_path = tmp / "haproxy.log"
        self.config_path.write_text(self.render(replicas))
        self.process: subprocess.Popen[bytes] | None = None

    def render(self, replicas: list[Replica]) -> str:
        """deploy/haproxy/haproxy.cfg with the single-host changes; every change must find its line."""
        text = DEPLOY_HAPROXY.read_text()
        servers = "\n".join(f"    server {r.name} 127.0.0.1:{r.port}" for r in replicas)
        changes = [
            (r"stats socket \S+", f"stats socket {self.socket_path}"),
            (r"maxconn 20000", "maxconn 400"),  # within any open-files limit (the test opens at most ~100)
            (r"\nresolvers docker\n(?:    .*\n)+", "\n"),  # no DNS: the servers are loopback addresses
            (r" resolvers docker resolve-prefer ipv4", ""),
            (r"    server-template gw 10 gateway:8000", servers),
            (r"    bind :8000\n", f"    bind 127.0.0.1:{self.port}\n    http-response set-header X-Served-By %s\n"),
            (r"    bind :8404\n", f"    bind 127.0.0.1:{self.stats_port}\n"),
        ]
        for pattern, replacement in changes:
            text, count = re.subn(pattern, replacement, text)
            assert count == 1, f"deploy/haproxy/haproxy.cfg changed: {pattern!r} matched {count} times"
        return text

    def start(self) -> None:
        haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
        checked = subprocess.run([haproxy, "-c", "-f", str(self.config_path)], capture_output=True, text=True,
                                 timeout=30, check=False)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen([haproxy, "-db", "-f", str(self.config_path)], stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: self._listening(), 20, "HAProxy to listen")

    def _listening(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"HAProxy exited: {self.log()[-2000:]}")
        return port_open(self.port) and self.socket_path.exists()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def command(self, line: str) -> str:
        """One command on HAProxy's stats socket (its runtime API); the answer."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(str(self.socket_path))
            sock.sendall(line.encode() + b"\n")
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode()

    def servers(self) -> dict[str, dict[str, str]]:
        """The backend's servers as ``show stat`` reports them: status (UP, DOWN, ...), sessions, check result."""
        rows = csv.DictReader(io.StringIO(self.command("show stat").lstrip("# ")))
        return {row["svname"]: row for row in rows
                if row["pxname"] == self.BACKEND and row["svname"] not in ("FRONTEND", "BACKEND")}

    def status(self, name: str) -> str:
        return self.servers()[name]["status"]

    def wait_status(self, name: str, status: str, timeout: float = 30) -> None:
        wait_for(lambda: self.status(name) == status, timeout, f"HAProxy to report {name} {status}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@dataclass
class Cluster:
    tmp: Path
    database_url: str
    redis_url: str
    broker_url: str
    sim: SimulatorProcess
    env: dict[str, str]
    replicas: list[Replica]
    balancer: LoadBalancer
    worker: Worker

    @property
    def port(self) -> int:
        return self.balancer.port

    def replica(self, name: str) -> Replica:
        return next(r for r in self.replicas if r.name == name)

    def manage(self, *args: str) -> str:
        """``manage.py ARGS`` against the cluster's database and Redis; its standard output."""
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True,
                              text=True, timeout=120, check=False)
        assert done.returncode == 0, f"manage.py {' '.join(args)} failed:\n{done.stdout}{done.stderr}"
        return done.stdout

    def create_key(self, name: str, *options: str) -> str:
        """``manage.py createkey NAME OPTIONS`` and wait until every replica serves the new configuration."""
        before = {r.name: r.config_version() for r in self.replicas}
        secret = self.manage("createkey", name, *options).strip()
        wait_for(lambda: all(r.config_version() not in (None, before[r.name]) for r in self.replicas), 30,
                 f"every replica to load the configuration with the key {name}")
        return secret

    def metric(self, name: str, **labels: str) -> float:
        """The sum over every replica's /metrics of the samples ``name`` with ``labels`` (as Prometheus sums)."""
        total = 0.0
        for replica in self.replicas:
            answer = asyncio.run(request(replica.port, "GET", "/metrics"))
            assert answer.status == 200, f"{replica.name} /metrics: {answer.status}"
            for family in text_string_to_metric_families(answer.body.decode()):
                total += sum(sample.value for sample in family.samples
                             if sample.name == name and labels.items() <= sample.labels.items())
        return total

    def revisions(self) -> dict[str, dict[str, Any]]:
        """Audit revisions by request id."""
        with psycopg.connect(self.database_url.replace("postgres://", "postgresql://")) as conn:
            rows = conn.execute("SELECT request_id, status, cost_usd FROM audit_auditrevision").fetchall()
        return {r[0]: {"status": r[1], "cost_usd": r[2]} for r in rows}

    def logs(self) -> str:
        parts = [f"--- {r.name}\n{r.log()[-3000:]}" for r in self.replicas]
        parts.append(f"--- haproxy\n{self.balancer.log()[-2000:]}")
        return "\n".join(parts)


def _stop_simulator(started: Future[SimulatorProcess]) -> None:
    if started.exception() is None:
        started.result().stop()


def _flush_redis(url: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


@contextlib.contextmanager
def cluster(tmp: Path, replicas: int = 3) -> Iterator[Cluster]:
    """The cluster, up and every replica in HAProxy's rotation; everything stopped afterwards."""
    with contextlib.ExitStack() as stack, ThreadPoolExecutor(2) as pool:
        # The broker's virtual host and the simulator are made while the database is migrated.
        vhost = RabbitVhost()
        stack.callback(vhost.delete)  # harmless when it was never created
        vhost_made = pool.submit(vhost.create)
        sim_started = pool.submit(start_simulator_process, config={"models": SIM_MODELS})
        stack.callback(_stop_simulator, sim_started)
        redis_url = f"redis://127.0.0.1:6379/{REDIS_DB}"
        _flush_redis(redis_url)
        stack.callback(_flush_redis, redis_url)
        database_url = stack.enter_context(fresh_database("cluster"))
        vhost_made.result()
        sim = sim_started.result()
        config = tmp / "config.yaml"
        config.write_text(yaml.safe_dump(gateway_config(sim.base_url)))
        env = {
            **os.environ, "DJANGO_SETTINGS_MODULE": "gomodel_site.settings", "DATABASE_URL": database_url,
            "REDIS_URL": redis_url, "CELERY_BROKER_URL": vhost.url, "GOMODEL_CONFIG": str(config),
            "CLUSTER_SIM_KEY": SIM_KEY, "GOMODEL_MASTER_KEY": MASTER_KEY, "GOMODEL_AUTH": "keys",
            "GOMODEL_TRUSTED_PROXIES": "1", "GOMODEL_CONFIG_POLL_SECONDS": "0.2", "PYTHONUNBUFFERED": "1",
        }
        gateways = [Replica(f"gw{i + 1}", tmp / f"gw{i + 1}", env) for i in range(replicas)]
        for gateway in gateways:
            stack.callback(gateway.kill_everything)
        # All at once, as an orchestrator starts them: six worker processes apply GOMODEL_CONFIG to the empty
        # database together, and the worker starts meanwhile.
        for gateway in gateways:
            gateway.launch()
        worker = Worker(env, tmp / "worker.log")
        stack.callback(worker.stop)
        worker.start()
        for gateway in gateways:
            wait_for(gateway._ready, 90, f"{gateway.name} to serve")
        balancer = LoadBalancer(tmp, gateways)
        balancer.start()
        stack.callback(balancer.stop)
        for gateway in gateways:
            balancer.wait_status(gateway.name, "UP")
        yield Cluster(tmp=tmp, database_url=database_url, redis_url=redis_url, broker_url=vhost.url, sim=sim,
                      env=env, replicas=gateways, balancer=balancer, worker=worker)


# -- the client ---------------------------------------------------------------------------------------------


@dataclass
class Answer:
    status: int | None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    sent_at: float = 0.0
    answered_at: float | None = None
    error: str | None = None

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def request_id(self) -> str | None:
        return self.headers.get("x-request-id")

    @property
    def served_by(self) -> str | None:
        return self.headers.get("x-served-by")

    @property
    def error_code(self) -> str | None:
        try:
            return str(self.json()["error"]["code"])
        except (ValueError, KeyError, TypeError):
            return None


async def request(port: int, method: str, path: str, body: Any = None, *, key: str | None = None,
                  timeout: float = 30) -> Answer:
    """One HTTP/1.1 request on a connection of its own (``Connection: close``); what came back."""
    answer = Answer(status=None, sent_at=time.monotonic())
    payload = b"" if body is None else json.dumps(body).encode()
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close", f"Content-Length: {len(payload)}"]
    if body is not None:
        head.append("Content-Type: application/json")
    if key is not None:
        head.append(f"Authorization: Bearer {key}")
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), timeout)
        writer.close()
    except (TimeoutError, OSError) as exc:
        answer.error = f"{type(exc).__name__}: {exc}"
        return answer
    status_head, _, content = raw.partition(b"\r\n\r\n")
    if not status_head.startswith(b"HTTP/1."):
        answer.error = f"no response ({len(raw)} bytes)"
        return answer
    lines = status_head.decode("latin-1").split("\r\n")
    answer.status = int(lines[0].split(" ", 2)[1])
    answer.headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    answer.body = content
    answer.answered_at = time.monotonic()
    return answer


def chat_body(model: str, text: str = "hello from the cluster test", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}], **extra}


def stop_group(process: subprocess.Popen[bytes] | None, signum: int) -> None:
    """Send ``signum`` to a process group started with ``start_new_session``."""
    if process is not None and process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signum)

