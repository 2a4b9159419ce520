"""Micro-benchmark: what ``audit.delivery.publisher.publish`` adds to a request (budget: 50 microseconds).

Run: ``.venv/bin/python bench/micro_publisher.py [--events 200000] [--rate 2000]``

Measures, on the calling thread, each ``publish`` call (the module-level function, as the request path calls
it) while the publisher thread is running and delivering to a sink that only serialises the batch as the
Celery sink would (no network: the broker is not what is measured). Events are published at ``--rate`` per
second in bursts, like a busy gateway process, so the thread's batching, redaction and serialisation
compete for the GIL with the caller as they do in production. Also reports the thread's CPU per event
(redaction and serialisation), which the process spends off the request path.

Exits non-zero when the p99 of the publish call exceeds the budget.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.delivery import publisher as publisher_module
from audit.delivery.event import prepare_event
from audit.delivery.publisher import Publisher
from audit.delivery.spool import Spool

BUDGET_US = 50.0

EVENT: dict[str, Any] = {
    "request_id": "", "operation_id": "op", "created_at": 0.0, "key_id": 3, "key_name": "ci-bot",
    "session_hash": "5e55" * 16, "session_source": "x-session-id", "endpoint": "openai", "requested_model": "normal",
    "stream": False,
    "tier": {"alias": "normal", "tier": "hard", "target": "normal-hard", "score": 7,
             "signals": [{"name": "code", "points": 3, "detail": "fenced code block"},
                         {"name": "length", "points": 4, "detail": "prompt over 6000 characters"}],
             "reasoning_shortcut": False, "forced": False, "pinned": True, "escalated": True, "pin_before": "easy"},
    "selection": {"virtual_model": "normal-hard", "strategy": "adaptive", "winner": "anthropic/claude",
                  "why": "p2c: lower load", "affinity": None,
                  "candidates": [{"target": "anthropic/claude", "weight": 1.0, "latency_ms": 120.0, "in_flight": 2,
                                  "cooldown_until": None, "status": "healthy"},
                                 {"target": "openai/gpt-5", "weight": 1.0, "latency_ms": 300.0, "in_flight": 5,
                                  "cooldown_until": None, "status": "healthy"}],
                  "skipped": []},
    "target": "anthropic/claude", "status": 200, "error_class": None, "error_message": None, "latency_ms": 812.3,
    "ttfb_ms": 95.1, "usage": {"input_tokens": 1000, "output_tokens": 200, "cached_input_tokens": 0,
                               "reasoning_tokens": 0},
    "cost_usd": 0.012, "validation": "accepted", "config_version": 12, "workload": None, "deadline_ms": 8000,
    "prompt_text": "Please review this function for bugs. " * 50, "output_text": "It looks correct. " * 20,
    "attempts": [{"attempt_id": "a1", "seq": 1, "target": "anthropic/claude", "provider": "anthropic",
                  "status": 200, "error_class": None, "reason": "", "latency_ms": 780.0, "ttfb_ms": 95.1,
                  "usage": {"input_tokens": 1000, "output_tokens": 200}, "cost_usd": 0.012, "action": "accepted",
                  "validation": "accepted", "health": {"status": "healthy", "latency_ms": 120.0, "in_flight": 2,
                                                       "cooldown_until": None}}],
}


class SerialisingSink:
    """Does what the Celery sink does to a batch before the network: JSON-encode it."""

    def __init__(self) -> None:
        self.events = 0

    def send(self, batch: list[dict[str, Any]]) -> None:
        json.dumps(batch)
        self.events += len(batch)

    def probe(self) -> None:
        return None

    def close(self) -> None:
        return None


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rate", type=float, default=2000.0, help="events per second offered")
    parser.add_argument("--burst", type=int, default=20, help="events published back to back")
    args = parser.parse_args()

    events = []
    for i in range(args.events):
        event = copy.deepcopy(EVENT)
        event["request_id"] = f"{i:032x}"
        event["created_at"] = time.time()
        events.append(event)

    sink = SerialisingSink()
    with tempfile.TemporaryDirectory() as spool_dir:
        instance = Publisher(sink_factory=lambda: sink, spool=Spool(Path(spool_dir)), batch_size=200,
                             batch_seconds=0.5, max_buffer=50_000, store_bodies=False, body_max_bytes=65536)
        publisher_module._publisher = instance  # what publish() uses once started
        instance.start()
        publish = publisher_module.publish
        clock = time.perf_counter_ns
        overhead = min(-(clock() - clock()) for _ in range(10_000))
        samples: list[float] = []
        started = time.perf_counter()
        for n in range(0, args.events, args.burst):
            for event in events[n:n + args.burst]:
                t0 = clock()
                publish(event)
                samples.append((clock() - t0 - overhead) / 1000)
            delay = started + (n + args.burst) / args.rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        elapsed = time.perf_counter() - started
        instance.shutdown(60)
        spooled = instance.counters["spooled"]
        assert sink.events + spooled == args.events, (sink.events, spooled, args.events)

    prepare_samples = []
    for event in events[:5000]:
        raw = copy.deepcopy(event)
        t0 = time.perf_counter_ns()
        prepare_event(raw, store_bodies=False, max_bytes=65536)
        prepare_samples.append((time.perf_counter_ns() - t0) / 1000)

    samples.sort()
    p99 = percentile(samples, 0.99)
    print(f"publish() over {len(samples):,} calls at {args.rate:,.0f} events/s (Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cores):")
    print(f"  mean {statistics.fmean(samples):.2f} us  p50 {percentile(samples, 0.5):.2f} us  "
          f"p99 {p99:.2f} us  p99.9 {percentile(samples, 0.999):.2f} us  max {samples[-1]:.1f} us")
    print(f"  offered for {elapsed:.1f}s; delivered {sink.events:,}, spooled (thread behind) {spooled:,}")
    print(f"publisher thread, per event (off the request path): redaction+validation "
          f"{statistics.median(prepare_samples):.1f} us median")
    print(f"budget {BUDGET_US:.0f} us for p99: {'OK' if p99 <= BUDGET_US else 'EXCEEDED'}")
    return 0 if p99 <= BUDGET_US else 1


if __name__ == "__main__":
    sys.exit(main())
