"""The publisher thread: batching by count and time, redaction, spooling, replay, overflow, shutdown.

The sink is the publisher's own seam (audit.delivery.publisher.Sink); a recording sink stands in for the broker
here. The real broker, worker and database are in test_delivery_faults.py.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from audit.delivery.publisher import Publisher
from audit.delivery.sinks import DeliveryError
from audit.delivery.spool import Spool
from tests.audit.events import make_event
from tests.waiting import wait_for

WAIT = 5.0  # generous upper bound for the background thread to act


class RecordingSink:
    """Records delivered batches; ``down`` makes every call fail like an unreachable broker."""

    def __init__(self) -> None:
        self.batches: list[list[dict[str, Any]]] = []
        self.down = False
        self.probes = 0
        self.lock = threading.Lock()

    def send(self, batch: list[dict[str, Any]]) -> None:
        if self.down:
            raise DeliveryError("broker down")
        with self.lock:
            self.batches.append(batch)

    def probe(self) -> None:
        self.probes += 1
        if self.down:
            raise DeliveryError("broker down")

    def close(self) -> None:
        pass

    def ids(self) -> list[str]:
        with self.lock:
            return [e["request_id"] for b in self.batches for e in b]


def make_publisher(spool_dir: Path, sink: RecordingSink, **overrides: Any) -> Publisher:
    options: dict[str, Any] = {
        "batch_size": 10, "batch_seconds": 0.2, "max_buffer": 1000, "store_bodies": False, "body_max_bytes": 1024,
    }
    options.update(overrides)
    return Publisher(sink_factory=lambda: sink, spool=Spool(spool_dir), **options)


def spooled_ids(spool_dir: Path) -> list[str]:
    ids = []
    for path in sorted(spool_dir.glob("audit-*.jsonl")):
        for line in path.read_bytes().splitlines(keepends=True):
            if line.endswith(b"\n"):  # a line still being written is not spooled yet (as replay sees it)
                ids += [e["request_id"] for e in json.loads(line)]
    return ids


def test_it_sends_full_batches_at_once_and_keeps_the_rest_for_the_batch_time(tmp_path: Path) -> None:
    sink = RecordingSink()
    publisher = make_publisher(tmp_path, sink, batch_seconds=600.0)  # far beyond any wait below
    for i in range(25):
        publisher.publish(make_event(f"r{i}"))
    wait_for(lambda: len(sink.batches) >= 2, WAIT, "full batches must not wait for the batch time", interval=0.01)
    assert [len(b) for b in sink.batches] == [10, 10]  # the partial five wait for theirs
    assert publisher.shutdown(2)  # ... or for shutdown, which sends everything
    assert sorted(sink.ids()) == sorted(f"r{i}" for i in range(25))


def test_every_full_batch_wakes_the_thread_again_after_it_took_the_last(tmp_path: Path) -> None:
    sink = RecordingSink()
    publisher = make_publisher(tmp_path, sink, batch_seconds=600.0)
    for wave in range(20):  # one full batch at a time, each published only after the one before was delivered
        for i in range(10):
            publisher.publish(make_event(f"w{wave}-{i}"))
        wait_for(lambda delivered=wave + 1: len(sink.batches) == delivered, WAIT,
                 f"full batch {wave} must not wait for the batch time", interval=0.005)
    assert publisher.shutdown(2)
    assert len(sink.ids()) == 200


def test_it_sends_a_partial_batch_once_the_batch_time_is_up(tmp_path: Path) -> None:
    sink = RecordingSink()
    publisher = make_publisher(tmp_path, sink, batch_seconds=0.2)
    for i in range(5):
        publisher.publish(make_event(f"r{i}"))
    wait_for(lambda: len(sink.ids()) == 5, WAIT, "len(sink.ids()) == 5", interval=0.01)
    assert [len(b) for b in sink.batches] == [5]
    publisher.shutdown(2)


def test_it_redacts_before_the_event_reaches_the_sink(tmp_path: Path) -> None:
    sink = RecordingSink()
    publisher = make_publisher(tmp_path, sink, batch_size=1)
    publisher.publish(make_event("r1", prompt_text="mail bob@example.com now", output_text="secret answer"))
    wait_for(lambda: sink.ids() == ["r1"], WAIT, 'sink.ids() == ["r1"]', interval=0.01)
    delivered = sink.batches[0][0]
    assert "prompt_text" not in delivered
    assert "output_text" not in delivered
    assert "bob@example.com" not in json.dumps(delivered)
    assert len(delivered["prompt_hash"]) == 64
    publisher.shutdown(2)


def test_it_spools_while_the_sink_is_down_and_replays_once_it_answers(tmp_path: Path) -> None:
    sink = RecordingSink()
    sink.down = True
    publisher = make_publisher(tmp_path, sink)
    for i in range(35):
        publisher.publish(make_event(f"r{i}"))
    wait_for(lambda: len(spooled_ids(tmp_path)) == 35, WAIT, "len(spooled_ids(tmp_path)) == 35", interval=0.01)
    assert sink.ids() == []
    assert not publisher.healthy
    sink.down = False
    # Probes back off (1 s, 2 s, 4 s...); the file goes once all its batches were sent.
    wait_for(lambda: len(sink.ids()) == 35 and not spooled_ids(tmp_path), 20, "the spool replayed",
             interval=0.01)
    assert sorted(sink.ids()) == sorted(f"r{i}" for i in range(35))
    assert publisher.healthy
    publisher.shutdown(2)


def test_it_replays_what_a_previous_process_spooled_at_start_up(tmp_path: Path) -> None:
    old = Spool(tmp_path)
    old.append([make_event("crashed-1"), make_event("crashed-2")])
    old.close()  # the writer is gone (a dead process's lock is released the same way)
    sink = RecordingSink()
    publisher = make_publisher(tmp_path, sink)
    publisher.start()
    wait_for(lambda: sorted(sink.ids()) == ["crashed-1", "crashed-2"]
                      and not list(tmp_path.glob("audit-*.jsonl")),
             WAIT, "the crashed writer's spool replayed", interval=0.01)
    publisher.shutdown(2)


def test_it_does_not_replay_a_file_another_live_process_is_writing(tmp_path: Path) -> None:
    other = Spool(tmp_path)
    other.append([make_event("live-writer")])  # holds the flock on its active file
    sink = RecordingSink()
    publisher = make_publisher(tmp_path, sink)
    publisher.start()
    # The start-up replay is over once nothing is pending: it skipped the file its writer still holds.
    wait_for(lambda: not publisher._replay_pending, WAIT, "not publisher._replay_pending", interval=0.01)
    assert sink.ids() == []
    other.close()
    publisher._replay_pending = True  # as the periodic scan would
    publisher.request_flush()
    wait_for(lambda: sink.ids() == ["live-writer"], WAIT, 'sink.ids() == ["live-writer"]', interval=0.01)
    publisher.shutdown(2)


@pytest.fixture
def fsync_threads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the threads that called os.fsync (which still runs: this only watches)."""
    names: list[str] = []
    real_fsync = os.fsync

    def watched(fd: int) -> None:
        names.append(threading.current_thread().name)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", watched)
    return names


def test_publish_never_writes_the_spool_itself_even_when_the_buffer_is_full(
    tmp_path: Path, fsync_threads: list[str],
) -> None:
    sink = RecordingSink()
    sink.down = True
    publisher = make_publisher(tmp_path, sink, batch_size=10, max_buffer=50)
    for i in range(2000):  # far faster than the thread prepares and fsyncs: the buffer fills up
        publisher.publish(make_event(f"r{i}"))
    assert publisher.shutdown(WAIT)
    assert fsync_threads
    assert set(fsync_threads) == {"audit-publisher"}
    spooled = spooled_ids(tmp_path)
    assert len(spooled) + publisher.counters["dropped"] == 2000
    assert len(set(spooled)) == len(spooled)


def test_shutdown_flushes_everything_in_memory(tmp_path: Path) -> None:
    sink = RecordingSink()
    publisher = make_publisher(tmp_path, sink, batch_seconds=60)
    for i in range(7):
        publisher.publish(make_event(f"r{i}"))
    assert publisher.shutdown(WAIT)
    assert sorted(sink.ids()) == sorted(f"r{i}" for i in range(7))


def test_shutdown_spools_when_the_sink_is_down(tmp_path: Path) -> None:
    sink = RecordingSink()
    sink.down = True
    publisher = make_publisher(tmp_path, sink, batch_seconds=60)
    for i in range(7):
        publisher.publish(make_event(f"r{i}"))
    assert publisher.shutdown(WAIT)
    assert sorted(spooled_ids(tmp_path)) == sorted(f"r{i}" for i in range(7))


def test_a_spool_keeps_the_unsent_rest_when_delivery_fails_midway(tmp_path: Path) -> None:
    writer = Spool(tmp_path)
    for n in range(3):
        writer.append([make_event(f"b{n}")])
    writer.close()
    sent: list[str] = []

    def send_two(batch: list[dict[str, Any]]) -> bool:
        if len(sent) == 2:
            return False
        sent.append(batch[0]["request_id"])
        return True

    replayer = Spool(tmp_path)
    assert replayer.replay_one(send_two) == "failed"
    replayer.close()
    assert sent == ["b0", "b1"]
    assert spooled_ids(tmp_path) == ["b2"]


def test_a_torn_last_line_is_dropped_and_the_rest_replayed(tmp_path: Path) -> None:
    writer = Spool(tmp_path)
    writer.append([make_event("whole")])
    writer.close()
    path = next(tmp_path.glob("audit-*.jsonl"))
    with open(path, "ab") as handle:
        handle.write(b'[{"request_id": "torn"')
    got: list[str] = []
    assert Spool(tmp_path).replay_one(lambda b: got.extend(e["request_id"] for e in b) or True) == "sent"
    assert got == ["whole"]


@pytest.mark.parametrize("count", [1, 3])
def test_spool_file_names_are_unique_per_process_and_file(tmp_path: Path, count: int) -> None:
    spools = [Spool(tmp_path, max_file_bytes=1) for _ in range(count)]
    for spool in spools:
        spool.append([make_event()])
        spool.append([make_event()])
    names = [p.name for p in tmp_path.glob("audit-*.jsonl")]
    assert len(names) == 2 * count == len(set(names))


@pytest.mark.parametrize("server_handler", [True, False])
def test_it_takes_sigterm_only_where_nothing_else_handles_it(server_handler: bool) -> None:
    from audit.delivery import publisher as module

    def servers_handler(signum: int, frame: Any) -> None:
        raise AssertionError("not called here")

    before = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, servers_handler if server_handler else signal.SIG_DFL)
        module._install_sigterm_handler()
        # A server's graceful stop ends in the lifespan shutdown, which flushes; a plain process would die
        # without running atexit, so there the publisher flushes first.
        assert signal.getsignal(signal.SIGTERM) is (servers_handler if server_handler else module._on_sigterm)
    finally:
        signal.signal(signal.SIGTERM, before)


def _dropped_metric() -> float:
    return REGISTRY.get_sample_value("gomodel_audit_events_dropped_total", {"reason": "buffer_full"}) or 0.0


def test_it_drops_new_events_loudly_when_neither_sink_nor_disk_accepts_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    sink = RecordingSink()
    sink.down = True
    metric_before = _dropped_metric()
    publisher = make_publisher(blocker / "spool", sink, batch_size=10, max_buffer=20, batch_seconds=0.05)
    for i in range(60):
        publisher.publish(make_event(f"r{i}"))
    # Memory stays bounded: the buffer, plus at most the batch the thread had in hand and put back.
    assert len(publisher._buffer) <= 20 + 10
    dropped = publisher._dropped
    assert 0 < dropped <= 40
    wait_for(lambda: publisher.counters["dropped"] == dropped, WAIT, "the drops counted",
             interval=0.01)  # the thread reports what publish dropped
    assert _dropped_metric() - metric_before == dropped
    assert any(r.levelname == "ERROR" and "AUDIT EVENTS DROPPED" in r.getMessage() for r in caplog.records)
    sink.down = False
    # What was kept is delivered once the sink answers. A drop refuses the event being published, so the
    # first twenty, which always fit, are among the kept ones.
    kept = 60 - dropped
    wait_for(lambda: len(sink.ids()) == kept, 20, "len(sink.ids()) == kept", interval=0.01)
    delivered = set(sink.ids())
    assert len(delivered) == kept
    assert {f"r{i}" for i in range(20)} <= delivered <= {f"r{i}" for i in range(60)}
    publisher.shutdown(2)


def test_the_audit_lag_gauges_show_the_oldest_undelivered_event_while_the_sink_is_away(tmp_path: Path) -> None:
    def lag() -> float:
        return REGISTRY.get_sample_value("gomodel_audit_oldest_undelivered_seconds") or 0.0

    sink = RecordingSink()
    sink.down = True
    publisher = make_publisher(tmp_path, sink)
    publisher.publish(make_event("late", created_at=time.time() - 40))

    # Spooled while the broker is away: the spool file is as old as its first write, the event older still.
    wait_for(lambda: "late" in spooled_ids(tmp_path), WAIT, '"late" in spooled_ids(tmp_path)', interval=0.01)
    # In the spool now, nothing in memory; the lag is its spool file's age (a file keeps batches, not times), and
    # keeps growing while the broker stays away.
    wait_for(lambda: REGISTRY.get_sample_value("gomodel_audit_undelivered_events") == 0 and lag() >= 1.5,
             WAIT, "nothing in memory and the spool file's age as the lag", interval=0.01)

    publisher.publish(make_event("waiting", created_at=time.time() - 40))  # in memory: batch time not up
    publisher._next_lag_report = 0.0
    publisher._report_lag()
    assert lag() >= 40
    assert REGISTRY.get_sample_value("gomodel_audit_undelivered_events") == 1

    sink.down = False
    wait_for(lambda: {"late", "waiting"} <= set(sink.ids()), 20, "both events delivered",
             interval=0.01)
    wait_for(lambda: lag() == 0.0, WAIT, "lag() == 0.0", interval=0.01)
    publisher.shutdown()


def test_preparing_a_batch_hands_the_gil_back_by_time_not_after_every_event(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from audit.delivery import batch_publisher

    now = [0.0]

    def clock() -> float:  # each reading 2**-14 s (61 us) after the last: exact in binary
        now[0] += 2.0**-14
        return now[0]

    sleeps: list[float] = []
    monkeypatch.setattr(batch_publisher.time, "perf_counter", clock)
    monkeypatch.setattr(batch_publisher.time, "sleep", sleeps.append)
    publisher = make_publisher(tmp_path, RecordingSink())
    prepared = publisher._prepare_events([make_event(f"yield-{i}") for i in range(40)])
    assert [event["request_id"] for event in prepared] == [f"yield-{i}" for i in range(40)]
    # One reading per event and one after each hand-over: 200 us have passed at every fourth event.
    assert sleeps == [0] * 10
