"""Per-model timing: latency, time to first byte and chunk pacing, measured from a client.

Lower bounds are exact (a sleep never ends early); upper bounds leave room for a busy machine.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx2 as httpx
import pytest

from routing.simulator import SimulatorServer
from tests.simulator.wire_helpers import request_for

CONFIG = {"models": {
    "slow-json": {"latency_ms": 300},
    "paced": {"ttfb_ms": 200, "chunk_count": 5, "chunk_interval_ms": 100},
    "spread": {"ttfb_ms": 100, "latency_ms": 500, "chunk_count": 5},
}}


@pytest.fixture(scope="module")
def timed() -> Iterator[httpx.Client]:
    with SimulatorServer(CONFIG) as sim, httpx.Client(base_url=sim.base_url, timeout=10) as http:
        yield http


def arrivals(client: httpx.Client, model: str, wire: str = "openai") -> list[float]:
    """Seconds from sending the request to each raw piece of the streamed response."""
    path, headers, body = request_for(wire, model, stream=True)
    started = time.monotonic()
    times = []
    with client.stream("POST", path, json=body, headers=headers) as response:
        for _ in response.iter_raw():
            times.append(time.monotonic() - started)
    return times


def test_latency_delays_a_json_answer(timed: httpx.Client) -> None:
    path, headers, body = request_for("anthropic", "slow-json")

    started = time.monotonic()
    response = timed.post(path, json=body, headers=headers)

    assert response.status_code == 200
    assert 0.3 <= time.monotonic() - started < 1.5


def test_ttfb_and_chunk_interval_pace_a_stream(timed: httpx.Client) -> None:
    times = arrivals(timed, "paced")

    # Opening with the first chunk, three chunks, the last chunk with the closing (the end of the chunked
    # body may arrive as one more piece right after it).
    paced = times[:5]
    assert len(times) in (5, 6)
    # Chunk i leaves the simulator at ttfb + i * interval at the earliest; a client can only see it later.
    assert all(arrival >= 0.2 + index * 0.1 for index, arrival in enumerate(paced))
    assert paced[0] < 0.6
    gaps = [later - earlier for earlier, later in zip(paced, paced[1:], strict=False)]
    assert all(gap < 0.4 for gap in gaps)


def test_latency_without_an_interval_spreads_the_chunks_to_end_on_time(timed: httpx.Client) -> None:
    times = arrivals(timed, "spread", wire="gemini")

    assert 0.1 <= times[0] < 0.5
    assert 0.5 <= times[-1] < 1.2
