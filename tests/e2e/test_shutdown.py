"""Stopping the gateway under load, run exactly as the README's production command runs it: granian with the
ASGI lifespan protocol, two worker processes.

- SIGTERM with hundreds of slow requests and streams in flight: every one of them is answered completely, and
  every request that got an answer has its audit revision once the gateway (and, with a broker, the Celery
  worker) runs again - with the audit written in process and through RabbitMQ;
- a stream longer than GOMODEL_SHUTDOWN_GRACE is cut at the end of the grace, and still audited;
- SIGKILL: every request answered in full before the kill is stored (the audit journal keeps what was in memory).

The provider simulator runs in a process of its own; the test process is the client, speaking plain HTTP/1.1
over one connection per request so that it knows exactly which requests got a complete answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from routing.simulator.server import SimulatorProcess, start_simulator_process
from tests.audit.procs import RabbitVhost, Worker, free_port, port_open
from tests.e2e.conftest import fresh_database
from tests.gateway_process import ROOT
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.services]

SIM_KEY = "sim-key-for-shutdown-tests"
SIM_MODELS = {
    "slow-json": {"latency_ms": 2500},
    "slow-stream": {"chunk_count": 10, "chunk_interval_ms": 250},
    "endless-stream": {"chunk_count": 120, "chunk_interval_ms": 500},
    "quick": {"latency_ms": 50},
}
IN_FLIGHT_AT_SIGNAL = 500
FLUSH_INTERVAL = 0.5  # AUDIT_FLUSH_INTERVAL's default


def gateway_config(sim_url: str) -> dict[str, Any]:
    return {
        "providers": [{"name": "oa", "kind": "openai", "base_url": f"{sim_url}/v1", "api_key": "${SHUTDOWN_SIM_KEY}"}],
        "models": [{"provider": "oa", "upstream": name, "capabilities": ["text"]} for name in SIM_MODELS],
    }


class ProductionGateway:
    """``granian --interface asgi --workers 2`` (the README's command) in a process group of its own."""

    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        self.env = env
        self.log_path = tmp / "gateway.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._log_start = 0

    def start(self) -> None:
        self.launch()
        wait_for(self._ready, 60, "both workers to serve and /health/ready to answer")

    def launch(self) -> None:
        command = [sys.executable, "-m", "granian", "--interface", "asgi", "--workers", "2", "--backpressure", "2000",
                   "--host", "127.0.0.1", "--port", str(self.port), "gomodel_site.asgi:application"]
        with open(self.log_path, "ab") as log:
            self._log_start = log.tell()
            self.process = subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def _ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"the gateway exited: {self.log()[-3000:]}")
        # Both workers serve: the load reaches either (a stop during start-up has a test of its own below).
        if not (self.logged(b"Started worker-1") and self.logged(b"Started worker-2")):
            return False
        return port_open(self.port) and asyncio.run(_get_status(self.port, "/health/ready")) == 200

    def signal(self, signum: int) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signum)  # the master: it forwards SIGTERM to its workers

    def kill_everything(self) -> None:
        """SIGKILL the master and both workers at once, as the kernel's OOM killer or a power cut would."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)

    def wait(self, timeout: float) -> int:
        assert self.process is not None
        return self.process.wait(timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def logged(self, text: bytes) -> bool:
        """Whether the current run's log holds ``text``."""
        return text in self.log_path.read_bytes()[self._log_start:]


@dataclass
class Outcome:
    sent_at: float
    status: int | None = None
    request_id: str | None = None
    complete: bool = False
    answered_at: float | None = None
    error: str | None = None


async def _get_status(port: int, path: str) -> int | None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return None
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    raw = await reader.read()
    writer.close()
    return int(raw.split(b" ", 2)[1]) if raw.startswith(b"HTTP/1.1 ") else None


def _dechunk(body: bytes) -> tuple[bytes, bool]:
    """The payload of a chunked body, and whether it ended with the last (empty) chunk."""
    out = bytearray()
    while True:
        size_line, sep, rest = body.partition(b"\r\n")
        if not sep:
            return bytes(out), False
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            return bytes(out), True
        if len(rest) < size + 2:
            return bytes(out), False
        out += rest[:size]
        body = rest[size + 2:]


async def chat(port: int, model: str, *, stream: bool, timeout: float = 120) -> Outcome:
    """One chat completion on a connection of its own; what came back and whether it was complete."""
    outcome = Outcome(sent_at=time.monotonic())
    body = json.dumps({"model": f"oa/{model}", "stream": stream,
                       "messages": [{"role": "user", "content": "tell me about graceful shutdowns"}]}).encode()
    request = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), timeout)
        writer.close()
    except (TimeoutError, OSError) as exc:
        outcome.error = f"{type(exc).__name__}: {exc}"
        return outcome
    head, _, payload = raw.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 "):
        outcome.error = f"no response ({len(raw)} bytes)"
        return outcome
    outcome.answered_at = time.monotonic()
    lines = head.decode("latin-1").split("\r\n")
    outcome.status = int(lines[0].split(" ", 2)[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    outcome.request_id = headers.get("x-request-id")
    if headers.get("transfer-encoding") == "chunked":
        payload, ended = _dechunk(payload)
    else:
        ended = len(payload) == int(headers.get("content-length", -1))
    if stream:
        outcome.complete = ended and b"data: [DONE]" in payload
    else:
        try:
            outcome.complete = ended and bool(json.loads(payload).get("choices"))
        except ValueError:
            outcome.complete = False
    return outcome


def revisions(database_url: str) -> dict[str, dict[str, Any]]:
    with psycopg.connect(database_url.replace("postgres://", "postgresql://")) as conn:
        rows = conn.execute("SELECT request_id, status, error_message FROM audit_auditrevision").fetchall()
    return {r[0]: {"status": r[1], "error_message": r[2]} for r in rows}


@contextlib.contextmanager
def simulator() -> Iterator[SimulatorProcess]:
    with start_simulator_process(config={"models": SIM_MODELS}) as sim:
        yield sim


def gateway_env(tmp: Path, sim: SimulatorProcess, database_url: str, **extra: str) -> dict[str, str]:
    config = tmp / "config.yaml"
    config.write_text(yaml.safe_dump(gateway_config(sim.base_url)))
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "gomodel_site.settings", "DATABASE_URL": database_url,
            "GOMODEL_CONFIG": str(config), "SHUTDOWN_SIM_KEY": SIM_KEY, "GOMODEL_AUTH": "open",
            "GOMODEL_MASTER_KEY": "", "CELERY_BROKER_URL": "", "AUDIT_SPOOL_DIR": str(tmp / "spool"),
            "GOMODEL_UPSTREAM_MAX_CONNECTIONS_PER_ORIGIN": "1000",  # every request in flight reaches the provider
            "PYTHONUNBUFFERED": "1", **extra}


async def load_and_signal(gateway: ProductionGateway, sim: SimulatorProcess, *, count: int,
                          rate: float) -> tuple[list[Outcome], float]:
    """Send ``count`` slow requests (half JSON, half streams) at ``rate`` per second; SIGTERM the gateway once
    the simulator holds IN_FLIGHT_AT_SIGNAL of them. The outcomes, and when the signal was sent."""
    signalled: list[float] = []

    async def signal_when_busy() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if (await asyncio.to_thread(sim.stats))["in_flight"] >= IN_FLIGHT_AT_SIGNAL:
                gateway.signal(signal.SIGTERM)
                signalled.append(time.monotonic())
                return
            await asyncio.sleep(0.05)
        raise AssertionError("the load never reached the in-flight target")

    watcher = asyncio.create_task(signal_when_busy())
    started = time.monotonic()
    tasks = []
    for i in range(count):
        tasks.append(asyncio.create_task(chat(gateway.port, "slow-stream" if i % 2 else "slow-json",
                                              stream=bool(i % 2))))
        await asyncio.sleep(max(0.0, started + (i + 1) / rate - time.monotonic()))
    outcomes = await asyncio.gather(*tasks)
    await watcher
    return outcomes, signalled[0]


def check_drained(outcomes: list[Outcome], sim: SimulatorProcess) -> list[str]:
    """Every request the gateway took on was answered completely; the ids of the answered requests.

    The others were refused before the gateway read them (its workers had stopped accepting connections).
    """
    answered = [o for o in outcomes if o.status is not None]
    cut = [o for o in answered if not (o.status == 200 and o.complete)]
    assert cut == [], f"{len(cut)} requests were not answered fully, such as {cut[:3]}"
    upstream = sim.received()
    assert len(answered) == len(upstream) >= IN_FLIGHT_AT_SIGNAL
    assert {r.get("outcome") for r in upstream} == {"completed"}  # no upstream request was abandoned either
    ids = [o.request_id for o in answered]
    assert all(ids)
    assert len(set(ids)) == len(ids)
    return [i for i in ids if i]


@pytest.fixture
def database_url() -> Iterator[str]:
    with fresh_database("shutdown") as url:
        yield url


@pytest.mark.parametrize("broker", ["in-process", "rabbitmq"])
def test_sigterm_under_load_answers_every_request_in_flight_and_loses_no_audit_event(
    tmp_path: Path, database_url: str, broker: str,
) -> None:
    vhost = RabbitVhost() if broker == "rabbitmq" else None
    with simulator() as sim, contextlib.ExitStack() as cleanup:
        extra: dict[str, str] = {}
        if vhost is not None:
            vhost.create()
            cleanup.callback(vhost.delete)
            extra["CELERY_BROKER_URL"] = vhost.url
        env = gateway_env(tmp_path, sim, database_url, **extra)
        gateway = ProductionGateway(tmp_path, env)
        cleanup.callback(gateway.kill_everything)
        gateway.start()

        outcomes, signalled_at = asyncio.run(load_and_signal(gateway, sim, count=900, rate=300))
        assert gateway.wait(60) == 0, gateway.log()[-3000:]
        stopped_after = time.monotonic() - signalled_at
        sim.wait_until_idle(10)
        answered = check_drained(outcomes, sim)
        print(f"SIGTERM ({broker}): {len(answered)} requests answered in full, {len(outcomes) - len(answered)} "
              f"refused after the signal; stopped {stopped_after:.1f}s after it")
        log = gateway.log()
        assert "stopping: " in log
        assert "every audit event was delivered or spooled" in log
        assert "Application callable raised" not in log
        assert "NO ASGI LIFESPAN" not in log

        # Running again: the gateway replays its spool (if anything went there) and, with a broker, the worker
        # stores what waited in the queue while no worker ran.
        gateway.start()
        if vhost is not None:
            worker = Worker({**env, "DJANGO_SETTINGS_MODULE": "gomodel_site.settings"}, tmp_path / "worker.log")
            worker.start()
            cleanup.callback(worker.stop)
        wait_for(lambda: set(answered) <= revisions(database_url).keys(), 120,
                 f"the audit revisions of the {len(answered)} answered requests")
        assert not list((tmp_path / "spool").glob("audit-*.jsonl"))


def test_a_stream_longer_than_the_grace_is_cut_at_its_end_and_still_audited(
    tmp_path: Path, database_url: str,
) -> None:
    with simulator() as sim, contextlib.ExitStack() as cleanup:
        gateway = ProductionGateway(tmp_path, gateway_env(tmp_path, sim, database_url, GOMODEL_SHUTDOWN_GRACE="2s"))
        cleanup.callback(gateway.kill_everything)
        gateway.start()

        async def scenario() -> tuple[list[Outcome], float]:
            streams = [asyncio.create_task(chat(gateway.port, "endless-stream", stream=True)) for _ in range(6)]
            await asyncio.to_thread(wait_for, lambda: sim.stats()["in_flight"] >= 6, 30, "the streams to start")
            gateway.signal(signal.SIGTERM)
            signalled_at = time.monotonic()
            return list(await asyncio.gather(*streams)), signalled_at

        outcomes, signalled_at = asyncio.run(scenario())
        assert gateway.wait(60) == 0
        stopped_after = time.monotonic() - signalled_at
        # The streams had a minute to go: the stop took the grace and the flush, not the streams' time.
        assert stopped_after < 30, f"the gateway took {stopped_after:.1f}s to stop"
        assert all(o.status == 200 and not o.complete for o in outcomes)
        assert "GOMODEL_SHUTDOWN_GRACE is over; cancelling the" in gateway.log()
        stored = revisions(database_url)  # flushed at the stop itself: nothing needs to run again
        assert all(o.request_id in stored for o in outcomes)
        assert {stored[o.request_id]["error_message"] for o in outcomes} == {"client_disconnected"}


def test_sigkill_loses_no_audit_event_of_an_answered_request(tmp_path: Path, database_url: str) -> None:
    """Every request whose answer - JSON, or a stream up to its [DONE] - reached the client before both workers
    were SIGKILLed has its revision once the gateway runs again: the restarted workers replay the killed ones'
    audit journals (audit/delivery/journal.py), which hold what the publisher had not yet delivered."""
    with simulator() as sim, contextlib.ExitStack() as cleanup:
        gateway = ProductionGateway(tmp_path, gateway_env(tmp_path, sim, database_url))
        cleanup.callback(gateway.kill_everything)
        gateway.start()

        async def scenario() -> tuple[list[Outcome], list[Outcome], float]:
            outcomes: list[Outcome] = []
            streams: list[Outcome] = []
            stop_at = time.monotonic() + 5

            async def client(stream: bool) -> None:
                while time.monotonic() < stop_at:
                    outcome = await chat(gateway.port, "quick", stream=stream, timeout=10)
                    (streams if stream else outcomes).append(outcome)
                    if outcome.status is None:
                        return

            clients = [asyncio.create_task(client(stream=bool(i % 2))) for i in range(60)]
            await asyncio.sleep(4)
            killed_at = time.monotonic()
            await asyncio.to_thread(gateway.kill_everything)
            await asyncio.gather(*clients)
            return outcomes, streams, killed_at

        outcomes, streams, killed_at = asyncio.run(scenario())
        answered = [o for o in outcomes + streams if o.status == 200 and o.complete]
        assert len(answered) > 300  # under load: hundreds per second, even on a busy two-core machine
        assert sum(o.complete for o in streams) > 100
        gateway.start()  # replays the killed workers' journals (and whatever they had spooled)
        expected = {o.request_id for o in answered}
        try:
            wait_for(lambda: expected <= revisions(database_url).keys(), 60, "every answered request's revision")
        except AssertionError:
            stored = revisions(database_url)
            lost = sorted(round(killed_at - (o.answered_at or 0), 3) for o in answered if o.request_id not in stored)
            raise AssertionError(f"{len(lost)} of {len(answered)} answered requests have no revision; answered "
                                 f"this many seconds before the kill: {lost[:20]}\n{gateway.log()[-3000:]}") from None
        # The journal is what kept them: the events of the last flush interval were only in memory at the kill.
        assert "events of a gateway process that died before delivering them" in gateway.log()
        recent = sum(killed_at - (o.answered_at or 0) < FLUSH_INTERVAL for o in answered)
        print(f"SIGKILL: {len(answered)} answered in full ({sum(o.complete for o in streams)} streams), all stored; "
              f"{recent} of them answered in the last {FLUSH_INTERVAL}s before the kill")


def test_a_stop_signal_sent_while_the_workers_start_is_not_lost(tmp_path: Path, database_url: str) -> None:
    with simulator() as sim, contextlib.ExitStack() as cleanup:
        gateway = ProductionGateway(tmp_path, gateway_env(tmp_path, sim, database_url))
        cleanup.callback(gateway.kill_everything)
        gateway.launch()
        # The master has forked the workers, which are importing the application (a second or two).
        wait_for(lambda: gateway.logged(b"Spawning worker-2"), 30, "the workers to be forked")
        gateway.signal(signal.SIGTERM)
        assert gateway.wait(60) == 0, gateway.log()[-3000:]
