"""The in-place metric value (routing/ops/metric_values.py) writes files prometheus_client reads back exactly as
its own value's files: the same exposition for the same increments, sums across processes (a forked child
included) and no increment lost to threads. Each scenario runs in a process of its own, since the value class is
chosen from the environment before the first metric exists."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCENARIO = textwrap.dedent("""
    import os, sys, threading
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, multiprocess
    if sys.argv[1] == "slots":
        from routing.ops import metric_values
        metric_values.install()
        from routing.ops.metric_kinds import Histogram  # its sum and bucket written together (inc_with)
    requests = Counter("t_requests_total", "requests", ["model"])
    latency = Histogram("t_latency_seconds", "latency", buckets=(0.1, 1.0))
    sizes = Histogram("t_sizes", "sizes", ["kind"], buckets=(10.0, 100.0))
    inflight = Gauge("t_inflight", "in flight", multiprocess_mode="livesum")
    for _ in range(3):
        requests.labels("a").inc()
    requests.labels("b").inc(2.5)
    latency.observe(0.05)
    latency.observe(0.5)
    inflight.set(4)
    child = os.fork()
    if child == 0:  # the child's increments land in a file of its own pid
        requests.labels("a").inc(10)
        latency.observe(5)
        os._exit(0)
    os.waitpid(child, 0)
    def hammer():
        for i in range(20000):
            requests.labels("c").inc()
            sizes.labels("x").observe(i % 200)
    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    from prometheus_client import values
    sys.stdout.write(values.ValueClass.__name__ + "\\n" + generate_latest(registry).decode())
""")


def exposition(kind: str, directory: Path) -> str:
    directory.mkdir()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", SCENARIO, kind], env=env, capture_output=True, text=True,
                          timeout=120, check=True)
    value_class, text = done.stdout.split("\n", 1)
    assert value_class == ("SlotValue" if kind == "slots" else "MmapedValue")
    return text


def sample(text: str, name: str) -> float:
    [line] = [ln for ln in text.splitlines() if ln.startswith(name + " ")]
    return float(line.rsplit(" ", 1)[1])


def test_the_slot_value_sums_across_a_fork_and_loses_nothing_to_threads(tmp_path: Path) -> None:
    text = exposition("slots", tmp_path / "slots")
    assert sample(text, 't_requests_total{model="a"}') == 13.0  # 3 here, 10 in the forked child
    assert sample(text, 't_requests_total{model="b"}') == 2.5
    assert sample(text, 't_requests_total{model="c"}') == 80000.0
    assert sample(text, "t_latency_seconds_count") == 3.0
    assert sample(text, 't_latency_seconds_bucket{le="1.0"}') == 2.0
    assert sample(text, 't_sizes_count{kind="x"}') == 80000.0
    assert sample(text, 't_sizes_bucket{kind="x",le="10.0"}') == 4 * 100 * 11  # 0..10 of every 200
    assert sample(text, 't_sizes_sum{kind="x"}') == 4 * 100 * sum(range(200))
    assert sample(text, "t_inflight") == 4.0  # the child's file holds 0 for it: a live sum of one process
    assert len(list((tmp_path / "slots").glob("counter_*.db"))) == 2


def test_the_files_read_back_as_prometheus_clients_own_values_files(tmp_path: Path) -> None:
    slots, stock = exposition("slots", tmp_path / "slots"), exposition("stock", tmp_path / "stock")
    assert sorted(slots.splitlines()) == sorted(stock.splitlines())  # the same samples; files are read in any order
