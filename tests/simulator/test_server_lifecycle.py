"""Starting and stopping the in-process simulator: ports, held requests at shutdown, restarts."""

from __future__ import annotations

import logging
import threading
import time

import httpx2 as httpx
import pytest

from routing.simulator import SimulatorServer
from tests.simulator.wire_helpers import openai_body


def test_it_listens_on_a_free_loopback_port_and_reports_its_url() -> None:
    with SimulatorServer() as first, SimulatorServer() as second:
        assert first.port != second.port
        assert first.base_url == f"http://127.0.0.1:{first.port}"
        assert httpx.get(first.base_url + "/health").json() == {"status": "ok"}


def test_stopping_drops_held_requests_at_once_without_error_logs(caplog: pytest.LogCaptureFixture) -> None:
    sim = SimulatorServer({"models": {"streamy": {"chunk_count": 50, "chunk_interval_ms": 200}}}).start()
    sim.set_fault("held", {"kind": "timeout", "seconds": 60})
    failures: list[BaseException] = []

    def call(body: dict[str, object]) -> None:
        try:
            with httpx.Client(base_url=sim.base_url, timeout=30) as http:
                http.post("/v1/chat/completions", json=body).read()
        except httpx.HTTPError as exc:
            failures.append(exc)

    callers = [threading.Thread(target=call, args=(openai_body(model="held"),)),
               threading.Thread(target=call, args=(openai_body(model="streamy", stream=True),))]
    for caller in callers:
        caller.start()
    give_up = time.monotonic() + 10
    while sim.stats()["in_flight"] < 2:
        assert time.monotonic() < give_up, "the two requests never reached the simulator"
        time.sleep(0.01)

    with caplog.at_level(logging.WARNING):
        sim.stop()
    for caller in callers:
        caller.join(5)

    assert len(failures) == 2
    assert all(isinstance(f, httpx.RemoteProtocolError) for f in failures)
    # Ended by the stop, not by the 60 s hold or the 10 s stream running out.
    assert [r["outcome"] for r in sim.received()] == ["shutdown", "shutdown"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_it_refuses_to_start_twice() -> None:
    with SimulatorServer() as sim, pytest.raises(RuntimeError, match="already running"):
        sim.start()
