"""A stand-in for a gateway process's audit half: publishes events at a steady rate through the real publisher.

Run as ``python -m tests.audit.publish_load --prefix P --count N --rate R`` with the environment of the
deployment under test (DATABASE_URL, CELERY_BROKER_URL, AUDIT_SPOOL_DIR...). Request ids are
``P-000000``, ``P-000001``, ... Before each publish the index is written to ``--progress`` (an mmap'd file
that survives the process being killed), so a test knows exactly which events were handed over.
Without ``--hold`` it shuts the publisher down at the end (flush) and prints its counters as JSON.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--rate", type=float, default=200.0, help="events per second")
    parser.add_argument("--progress", default="")
    parser.add_argument("--hold", action="store_true", help="after publishing, wait to be killed")
    args = parser.parse_args()

    import django

    django.setup()
    from audit.delivery import publisher
    from tests.audit.events import make_event

    progress = None
    if args.progress:
        with open(args.progress, "wb") as handle:
            handle.write(b"\xff" * 8)
        fd = os.open(args.progress, os.O_RDWR)
        progress = mmap.mmap(fd, 8)

    instance = publisher.start()
    print("started", flush=True)
    started = time.monotonic()
    for i in range(args.count):
        if progress is not None:
            progress[0:8] = i.to_bytes(8, "little")
        publisher.publish(make_event(f"{args.prefix}-{i:06d}"))
        delay = started + (i + 1) / args.rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    print("published", args.count, flush=True)
    if args.hold:
        while True:
            time.sleep(3600)
    ok = publisher.shutdown(60)
    print(json.dumps({"ok": ok, **instance.counters}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
