"""Micro-benchmark: the publisher thread's CPU per audit event when it writes to PostgreSQL itself.

Run: ``.venv/bin/python bench/micro_audit_ingest.py [--events 10000] [--batch 200] [--rounds 3]``

Without ``CELERY_BROKER_URL`` the publisher thread of every gateway worker validates and redacts each event
(``prepare_event``) and inserts each batch through ``DatabaseSink`` (``revisions_ingest``). Both compete for
the GIL with the worker's event loop, so what matters is the thread's own CPU time (``time.thread_time``),
not the database server's. This script measures, per event:

- ``prepare``: ``prepare_event`` on a raw event as the request path builds it;
- ``insert``: ``DatabaseSink.send`` of prepared batches of new request ids;
- ``redelivery``: the same batches sent again (every request id already stored: nothing changes);
- ``worker``: ``revisions_ingest`` on raw batches, as the Celery worker calls it (prepares, then inserts).

It needs PostgreSQL on 127.0.0.1:5432 (user ``postgres``, trust authentication) and creates and drops the
throwaway database ``gomodel_micro_audit`` (``--database``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.audit.events import make_event  # noqa: E402

PROMPT = "Please review this function for bugs; mail alice@example.com if unsure. " * 25
OUTPUT = "It looks correct, apart from the off-by-one in the loop bound. " * 10


def raw_events(count: int) -> list[dict[str, Any]]:
    """Events as the request path hands them over: long prompt and output, two attempts, a nested selection."""
    run = uuid.uuid4().hex[:8]
    return [make_event(f"bench-{run}-{i:06d}", prompt_text=PROMPT, output_text=OUTPUT) for i in range(count)]


def cpu_ns(work: Callable[..., Any], *args: Any) -> tuple[int, Any]:
    """The calling thread's CPU time of ``work(*args)`` in nanoseconds, and its result."""
    started = time.thread_time_ns()
    result = work(*args)
    return time.thread_time_ns() - started, result


def measure_round(events: int, batch: int) -> dict[str, float]:
    """One round, batch by batch: only about one batch is alive at a time, as in the publisher thread."""
    from django.conf import settings

    from audit.delivery.event import prepare_event
    from audit.delivery.sinks import DatabaseSink
    from audit.services import revisions_ingest

    store_bodies, max_bytes = settings.AUDIT_STORE_BODIES, settings.AUDIT_BODY_MAX_BYTES

    def prepare(raw: list[Any]) -> list[dict[str, Any]]:
        return [prepare_event(e, store_bodies=store_bodies, max_bytes=max_bytes) for e in raw]

    def worker(raw: list[Any]) -> int:
        return revisions_ingest(events=raw)

    sink = DatabaseSink()
    spent = dict.fromkeys(("prepare", "insert", "redelivery", "worker"), 0)
    batches = events // batch
    for _ in range(batches):
        took, prepared = cpu_ns(prepare, raw_events(batch))
        spent["prepare"] += took
        spent["insert"] += cpu_ns(sink.send, prepared)[0]
        spent["redelivery"] += cpu_ns(sink.send, prepared)[0]
        spent["worker"] += cpu_ns(worker, raw_events(batch))[0]
    sink.close()
    return {name: ns / 1000 / (batches * batch) for name, ns in spent.items()}


def measure(events: int, batch: int, rounds: int) -> dict[str, list[float]]:
    measure_round(batch, batch)  # warm-up: connection, statement plans, imports
    results: dict[str, list[float]] = {"prepare": [], "insert": [], "redelivery": [], "worker": []}
    for _ in range(rounds):
        for name, value in measure_round(events, batch).items():
            results[name].append(value)
    return results


def admin_connection() -> Any:
    import psycopg

    return psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=10_000, help="events per round")
    parser.add_argument("--batch", type=int, default=200, help="events per batch (AUDIT_BATCH_SIZE)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database", default="gomodel_micro_audit", help="throwaway database (dropped)")
    args = parser.parse_args()

    with admin_connection() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{args.database}"')
    os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{args.database}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gomodel_site.settings")
    try:
        import django
        from django.core.management import call_command
        from django.db import connections

        django.setup()
        call_command("migrate", verbosity=0)
        results = measure(args.events, args.batch, args.rounds)
        connections.close_all()
    finally:
        with admin_connection() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')

    medians = {name: statistics.median(values) for name, values in results.items()}
    print(f"audit ingest, thread CPU per event (median of {args.rounds} rounds of {args.events:,} events, "
          f"batches of {args.batch}; Python {sys.version.split()[0]}, {os.cpu_count()} cores):")
    for name, value in medians.items():
        runs = ", ".join(f"{v:.1f}" for v in results[name])
        print(f"  {name:<11} {value:7.1f} us   ({runs})")
    print(f"publisher thread (prepare + insert): {medians['prepare'] + medians['insert']:.1f} us per event")
    return 0


if __name__ == "__main__":
    sys.exit(main())
