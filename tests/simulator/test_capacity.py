"""Capacity: a thousand slow streams held at once, and instant answers at a useful rate.

The simulator runs in its own process, as in the benchmarks, so the load client does not share its CPU.
"""

from __future__ import annotations

import pytest

from routing.simulator import start_simulator_process
from tests.simulator.raw_load import concurrent_exchanges, request_bytes, throughput
from tests.simulator.wire_helpers import openai_body

pytestmark = pytest.mark.slow

STREAMS = 1000


def test_it_holds_a_thousand_slow_streams_at_once() -> None:
    config = {"models": {"slow-stream": {"ttfb_ms": 200, "chunk_count": 10, "chunk_interval_ms": 300}}}
    request = request_bytes("/v1/chat/completions", openai_body(model="slow-stream", stream=True))

    with start_simulator_process(0, config) as sim:
        results = concurrent_exchanges("127.0.0.1", sim.port, request, STREAMS)
        sim.wait_until_idle()
        stats = sim.stats()

    errors = [r for r in results if isinstance(r, BaseException)]
    assert errors == []
    complete = [r for r in results if not isinstance(r, BaseException) and r[0] == 200 and r[1].endswith(b"[DONE]\n\n")]
    assert len(complete) == STREAMS
    assert stats["max_in_flight"] >= STREAMS * 0.9  # they were held together, not one after another


def test_it_answers_instant_requests_at_hundreds_per_second_or_more() -> None:
    request = request_bytes("/v1/chat/completions", openai_body(model="instant"))

    with start_simulator_process(0) as sim:
        throughput("127.0.0.1", sim.port, request, connections=20, seconds=0.5)  # warm up
        done, failed = throughput("127.0.0.1", sim.port, request, connections=50, seconds=3.0)

    rate = done / 3.0
    print(f"simulator: {rate:.0f} instant requests/s at concurrency 50")
    assert failed == 0
    assert rate >= 200  # a floor for a busy 2-core machine; an idle one does several times more
