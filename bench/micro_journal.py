"""Micro-benchmark: what the audit journal adds to a request's ``publish`` (audit/delivery/journal.py).

Run: ``.venv/bin/python bench/micro_journal.py [--events 40000] [--rate 2000] [--fsync]``

Publishes the same events (bench/micro_publisher.py's event: a 1,900-character prompt, one attempt) through
two publishers in turn - without a journal, then with one in a temporary directory - at ``--rate`` events per
second in bursts, with the publisher thread delivering to a sink that only serialises (no network), and
times each ``publish`` call on the calling thread as the request path makes it. Then it times the journal's
steps alone on one event: encoding (marshal, and JSON for comparison), AES-GCM, and the ``pwrite``.
``--fsync`` turns on ``AUDIT_JOURNAL_FSYNC`` (an fdatasync per publisher round, off the request path).
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
import timeit
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from micro_publisher import EVENT, SerialisingSink, percentile

from audit.delivery.journal import Journal, Keyring, encode_event, nonce
from audit.delivery.publisher import Publisher
from audit.delivery.spool import Spool


def run(events: list[dict[str, Any]], *, rate: float, burst: int, journal_dir: Path | None,
        fsync: bool) -> tuple[list[float], float, int]:
    """Publish every event; the publish() times in microseconds, the thread's CPU share, bytes journaled."""
    sink = SerialisingSink()
    with tempfile.TemporaryDirectory() as spool_dir:
        journal = None
        if journal_dir is not None:
            journal = Journal(journal_dir, Keyring(["bench-secret-" + "k" * 40]), fsync=fsync)
        publisher = Publisher(sink_factory=lambda: sink, spool=Spool(Path(spool_dir)), batch_size=200,
                              batch_seconds=0.5, max_buffer=50_000, store_bodies=False, body_max_bytes=65536,
                              journal=journal)
        publisher.start()
        publish = publisher.publish
        clock = time.perf_counter_ns
        overhead = min(-(clock() - clock()) for _ in range(10_000))
        samples: list[float] = []
        cpu0 = time.process_time()
        started = time.perf_counter()
        for n in range(0, len(events), burst):
            for event in events[n:n + burst]:
                t0 = clock()
                publish(event)
                samples.append((clock() - t0 - overhead) / 1000)
            delay = started + (n + burst) / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        publisher.shutdown(60)
        cpu = time.process_time() - cpu0
        written = journal.stats.bytes_written if journal is not None else 0
        assert sink.events + publisher.counters["spooled"] == len(events)
    return samples, cpu, written


def describe(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    return (f"  {name:<16} mean {statistics.fmean(ordered):6.2f} us  p50 {percentile(ordered, 0.5):6.2f} us  "
            f"p99 {percentile(ordered, 0.99):7.2f} us  p99.9 {percentile(ordered, 0.999):7.2f} us")


def steps(event: dict[str, Any], directory: Path) -> list[str]:
    """The journal's steps on one event, each timed alone (median of repeated runs)."""
    keyring = Keyring(["bench-secret-" + "k" * 40])
    cipher = Keyring.file_cipher(keyring.current, os.urandom(16))
    plaintext = encode_event(event)
    sealed = cipher.encrypt(nonce(48), plaintext, None)
    fd = os.open(directory / "steps.bin", os.O_RDWR | os.O_CREAT, 0o600)
    offset = [0]

    def write() -> None:
        os.pwrite(fd, sealed, offset[0])
        offset[0] += len(sealed)

    def time_us(fn: Any, number: int = 2000) -> float:
        return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6

    rows = [
        ("marshal.dumps", time_us(lambda: encode_event(event))),
        ("json.dumps (not used)", time_us(lambda: json.dumps(event, ensure_ascii=False, separators=(",", ":"),
                                                               default=str).encode())),
        ("AES-256-GCM seal", time_us(lambda: cipher.encrypt(nonce(48), plaintext, None))),
        ("pwrite", time_us(write)),
    ]
    os.close(fd)
    return [f"  {name:<22} {value:6.2f} us" for name, value in rows] + [
        f"  record: {len(sealed) + 4:,} bytes for {len(json.dumps(event)):,} bytes of JSON"]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=40_000)
    parser.add_argument("--rate", type=float, default=2000.0, help="events per second offered")
    parser.add_argument("--burst", type=int, default=20, help="events published back to back")
    parser.add_argument("--fsync", action="store_true", help="AUDIT_JOURNAL_FSYNC: fdatasync once per round")
    args = parser.parse_args()

    events = []
    for i in range(args.events):
        event = copy.deepcopy(EVENT)
        event["request_id"] = f"{i:032x}"
        event["created_at"] = time.time()
        events.append(event)

    with tempfile.TemporaryDirectory() as tmp:
        without, cpu_without, _ = run(events, rate=args.rate, burst=args.burst, journal_dir=None, fsync=False)
        with_journal, cpu_with, written = run(events, rate=args.rate, burst=args.burst,
                                              journal_dir=Path(tmp) / "journal", fsync=args.fsync)
        step_rows = steps(events[0], Path(tmp))

    load = os.getloadavg()
    print(f"publish() over {args.events:,} events at {args.rate:,.0f}/s (Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}):")
    print(describe("no journal", without))
    print(describe("journal" + (" + fsync" if args.fsync else ""), with_journal))
    added = statistics.median(with_journal) - statistics.median(without)
    print(f"  the journal adds {added:.2f} us per request at the median "
          f"({statistics.fmean(with_journal) - statistics.fmean(without):.2f} us on the mean); "
          f"{written / args.events:,.0f} bytes per event")
    print(f"  process CPU per event, request path and publisher thread together: "
          f"{cpu_without / args.events * 1e6:.1f} us without, {cpu_with / args.events * 1e6:.1f} us with")
    print("journal steps on one event (best of 5):")
    print("\n".join(step_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
