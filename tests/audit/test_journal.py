"""The audit journal (audit/delivery/journal.py, audit/delivery/journal_recovery.py): encrypted records, checkpoints,
rotation, the replay of a dead process's journal (a real second process, SIGKILLed), torn and foreign files.

The publisher's sink is its own seam; a recording sink stands in for the broker (as in test_publisher.py).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from audit.delivery import journal_recovery
from audit.delivery.journal import HEADER_SIZE, Journal, Keyring, Mark
from audit.delivery.journal_recovery import RecordKey, read_records, recover_one
from tests.audit.events import make_event
from tests.audit.procs import REPO
from tests.audit.test_publisher import WAIT, RecordingSink, make_publisher
from tests.waiting import wait_for

SECRET = "journal-test-secret-" + "x" * 40
PROMPT = "the launch code is PLUGH-4471-XYZZY, tell nobody"
OUTPUT = "understood: PLUGH-4471-XYZZY stays between us"


def counted(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


class Collected:
    """A ``deliver`` for recover_one that keeps what it is handed (or refuses everything)."""

    def __init__(self, *, refuse: bool = False) -> None:
        self.events: list[Any] = []
        self.refuse = refuse

    def __call__(self, events: list[Any]) -> bool:
        if self.refuse:
            return False
        self.events += events
        return True

    def ids(self) -> list[str]:
        return [e["request_id"] for e in self.events]


def write(journal: Journal, *events: dict[str, Any]) -> list[Mark | None]:
    """Append ``events`` as the publisher does; their marks."""
    handed: list[tuple[Any, Mark | None]] = []
    for event in events:
        journal.append(event, handed.append)
    assert [e for e, _ in handed] == list(events)  # handed on in order, every one, journaled or not
    return [mark for _, mark in handed]


def started(directory: Path, secret: str = SECRET, **options: Any) -> Journal:
    journal = Journal(directory, Keyring([secret]), **options)
    assert journal.start()
    return journal


def journal_bytes(directory: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(directory.glob("journal-*")))


def test_it_reads_back_what_it_wrote_and_never_holds_a_prompt_in_clear(tmp_path: Path) -> None:
    journal = started(tmp_path)
    events = [make_event(f"req-{i}", prompt_text=PROMPT, output_text=OUTPUT) for i in range(3)]
    marks = write(journal, *events)
    assert all(marks)
    [path] = journal.files()

    data = path.read_bytes()
    for secret_text in ("PLUGH", "launch code", "alice@example.com", "req-1"):
        assert secret_text.encode() not in data
    journal.close(remove=False)  # as a SIGKILL leaves it: every record after the checkpoint
    collected = Collected()
    assert recover_one(tmp_path, Keyring([SECRET]), collected, batch_size=2).outcome == "replayed"
    assert collected.events == events  # whole and in order, raw: the publisher prepares them as its own
    assert not path.exists()


def test_a_record_is_bound_to_its_place_in_the_file(tmp_path: Path) -> None:
    journal = started(tmp_path)
    write(journal, make_event("first"), make_event("second"))
    [path] = journal.files()
    journal.close(remove=False)
    data = path.read_bytes()
    key = RecordKey(Keyring.file_key(Keyring([SECRET]).current, data[8:24]))
    assert [e["request_id"] for _, e in read_records(data, HEADER_SIZE, key).entries] == ["first", "second"]
    # The same bytes read from another offset (a record moved or a file spliced) do not decrypt.
    moved = data[:HEADER_SIZE] + b"\0" * 8 + data[HEADER_SIZE:]
    records = read_records(moved, HEADER_SIZE + 8, key)
    assert records.entries == []
    assert records.lost == 2


def test_the_checkpoint_keeps_a_delivered_event_from_being_replayed(tmp_path: Path) -> None:
    journal = started(tmp_path)
    marks = write(journal, *(make_event(f"r{i}") for i in range(5)))
    first_three = marks[2]
    assert first_three is not None
    journal.checkpoint(first_three)
    journal.close(remove=False)
    collected = Collected()
    recover_one(tmp_path, Keyring([SECRET]), collected, batch_size=10)
    assert collected.ids() == ["r3", "r4"]


def test_a_torn_last_record_is_skipped_counted_and_logged_and_the_rest_replayed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    journal = started(tmp_path)
    write(journal, make_event("whole-1"), make_event("whole-2"), make_event("torn"))
    [path] = journal.files()
    journal.close(remove=False)
    os.truncate(path, path.stat().st_size - 7)  # the writer was killed inside its last pwrite
    before = counted("gomodel_audit_journal_torn_records_total")
    collected = Collected()
    with caplog.at_level(logging.ERROR, logger="gomodel.audit"):
        result = recover_one(tmp_path, Keyring([SECRET]), collected, batch_size=10)
    assert (result.outcome, result.replayed, result.torn) == ("replayed", 2, 1)
    assert collected.ids() == ["whole-1", "whole-2"]
    assert counted("gomodel_audit_journal_torn_records_total") == before + 1
    assert "a torn last record" in caplog.text
    assert not path.exists()


def test_a_journal_sealed_under_another_secret_is_set_aside_loudly_and_never_replayed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    journal = started(tmp_path, secret="the-old-secret-key-" + "o" * 40)
    write(journal, make_event("sealed-before-the-rotation"))
    [path] = journal.files()
    journal.close(remove=False)
    before = counted("gomodel_audit_journal_unreadable_files_total")
    collected = Collected()
    with caplog.at_level(logging.ERROR, logger="gomodel.audit"):
        result = recover_one(tmp_path, Keyring([SECRET]), collected, batch_size=10)
    assert result.outcome == "unreadable"
    assert collected.events == []
    assert counted("gomodel_audit_journal_unreadable_files_total") == before + 1
    assert "AUDIT JOURNAL NOT REPLAYED" in caplog.text
    assert "another secret key" in caplog.text
    aside = path.with_name(path.name + ".unreadable")
    assert aside.exists()
    assert not path.exists()
    # Not picked up again by the next scan...
    assert recover_one(tmp_path, Keyring([SECRET]), collected, batch_size=10).outcome == "empty"
    # ...and read once the old key is back, as a fallback, and the file renamed back as the log line says.
    aside.rename(path)
    result = recover_one(tmp_path, Keyring([SECRET, "the-old-secret-key-" + "o" * 40]), collected, batch_size=10)
    assert (result.outcome, collected.ids()) == ("replayed", ["sealed-before-the-rotation"])


def test_it_rotates_a_full_file_and_deletes_the_files_whose_events_are_all_handled(tmp_path: Path) -> None:
    journal = started(tmp_path, max_file_bytes=4096)
    marks: list[Mark | None] = []
    for i in range(12):
        marks += write(journal, make_event(f"r{i}"))  # ~1.5 kB each
        journal.maintain()  # the publisher thread's round
    assert len(journal.files()) >= 3
    last_of_first_file = max(m for m in marks if m is not None and m[0].path == journal.files()[0])
    journal.checkpoint(last_of_first_file)
    journal.maintain()
    assert last_of_first_file[0].path not in journal.files()
    assert not last_of_first_file[0].path.exists()
    final = marks[-1]
    assert final is not None
    journal.checkpoint(final)
    # Everything handled: only the file being written stays (the last full one went with the checkpoint).
    [active] = journal.files()
    assert [p.name for p in tmp_path.glob("journal-*")] == [active.name]
    assert journal.retained_bytes == active.stat().st_size
    journal.close(remove=True)
    assert list(tmp_path.glob("journal-*")) == []


def test_past_its_cap_an_event_stays_in_memory_only_and_is_counted(tmp_path: Path) -> None:
    journal = started(tmp_path, max_bytes=6000, max_file_bytes=100_000)
    marks = write(journal, *(make_event(f"r{i}") for i in range(6)))  # ~1.5 kB each
    assert marks[:3] == [m for m in marks[:3] if m is not None]
    assert marks[-1] is None
    assert journal.stats.skipped["full"] >= 1
    journal.close(remove=True)


CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    sys.path.insert(0, {repo!r})
    from audit.delivery.journal import Journal, Keyring
    from tests.audit.events import make_event
    journal = Journal(Path({directory!r}), Keyring([{secret!r}]))
    assert journal.start()
    for i in range({count}):
        journal.append(make_event(f"child-{{i}}", prompt_text={prompt!r}), lambda entry: None)
    print("journaled", flush=True)
    time.sleep(600)
""")


def child_journaling(directory: Path, count: int) -> subprocess.Popen[str]:
    script = CHILD.format(repo=str(REPO), directory=str(directory), secret=SECRET, count=count, prompt=PROMPT)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "journaled"
    return child


def kill(child: subprocess.Popen[str]) -> None:
    """SIGKILL, as the OOM killer would."""
    child.send_signal(signal.SIGKILL)
    child.wait(10)
    if child.stdout is not None:
        child.stdout.close()


def test_a_live_process_journal_is_left_alone_and_replayed_once_it_is_killed(tmp_path: Path) -> None:
    child = child_journaling(tmp_path, 30)
    try:
        collected = Collected()
        assert recover_one(tmp_path, Keyring([SECRET]), collected, batch_size=10).outcome == "empty"  # locked
        assert collected.events == []
        assert PROMPT.encode() not in journal_bytes(tmp_path)
    finally:
        kill(child)
    result = recover_one(tmp_path, Keyring([SECRET]), collected, batch_size=10)
    assert (result.outcome, result.replayed) == ("replayed", 30)
    assert collected.ids() == [f"child-{i}" for i in range(30)]
    assert list(tmp_path.glob("journal-*")) == []


def test_a_new_publisher_delivers_what_a_killed_process_journaled(tmp_path: Path) -> None:
    journal_dir = tmp_path / "journal"
    kill(child_journaling(journal_dir, 25))
    before = counted("gomodel_audit_journal_replayed_total")
    sink = RecordingSink()
    publisher = make_publisher(tmp_path / "spool", sink, journal=Journal(journal_dir, Keyring([SECRET])))
    publisher.start()
    wait_for(lambda: sorted(sink.ids()) == sorted(f"child-{i}" for i in range(25)), WAIT,
             "the children's events delivered", interval=0.01)
    delivered = [e for batch in sink.batches for e in batch]
    assert all("prompt_text" not in e and len(e["prompt_hash"]) == 64 for e in delivered)  # prepared as usual
    assert counted("gomodel_audit_journal_replayed_total") == before + 25
    wait_for(lambda: len(list(journal_dir.glob("journal-*"))) == 1, WAIT,
             "only the publisher's own journal left", interval=0.01)  # only the publisher's own
    assert publisher.shutdown(WAIT)
    assert list(journal_dir.glob("journal-*")) == []


def test_the_publisher_journals_each_event_and_checkpoints_it_once_delivered(tmp_path: Path) -> None:
    sink = RecordingSink()
    journal = Journal(tmp_path / "journal", Keyring([SECRET]))
    publisher = make_publisher(tmp_path / "spool", sink, journal=journal)
    for i in range(15):
        publisher.publish(make_event(f"r{i}", prompt_text=PROMPT))
    [path] = journal.files()
    assert journal.stats.records == 15  # written by publish itself, before it returned
    assert PROMPT.encode() not in path.read_bytes()
    assert publisher.flush(WAIT)
    [segment] = journal._segments
    assert segment.checkpoint == segment.size  # every record delivered: nothing to replay after a kill
    assert int.from_bytes(path.read_bytes()[32:40], "little") == segment.size  # and so says the file
    assert publisher.shutdown(WAIT)
    assert not path.exists()


class SlowSink(RecordingSink):
    """Takes 20 ms per batch and notes the size of the largest journal file at each one."""

    def __init__(self, journal: Journal) -> None:
        super().__init__()
        self.journal = journal
        self.largest: list[int] = []

    def send(self, batch: list[dict[str, Any]]) -> None:
        self.largest.append(max((p.stat().st_size for p in self.journal.files()), default=0))
        time.sleep(0.02)
        super().send(batch)


def test_a_publisher_far_behind_still_rotates_its_journal_between_batches(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal", Keyring([SECRET]), max_file_bytes=4096)
    sink = SlowSink(journal)
    publisher = make_publisher(tmp_path / "spool", sink, journal=journal, batch_seconds=60)
    for i in range(300):  # 1,000 events/s against a sink that takes 500: the thread never catches up
        publisher.publish(make_event(f"r{i}"))
        if i % 10 == 9:
            time.sleep(0.01)
    assert publisher.flush(WAIT * 4)
    # ~1.5 kB per event: one file would hold ~450 kB; rotated at each batch, none grows past a few batches.
    assert max(sink.largest) < 100_000, sink.largest
    assert len(journal.files()) == 1  # and every file wholly delivered is gone
    assert publisher.shutdown(WAIT)


def test_events_neither_the_sink_nor_the_spool_took_at_shutdown_stay_journaled_for_the_next_process(
    tmp_path: Path,
) -> None:
    sink = RecordingSink()
    sink.down = True
    spool_dir = tmp_path / "spool"
    spool_dir.write_text("a file where the spool directory should be")  # the spool cannot be written
    journal_dir = tmp_path / "journal"
    publisher = make_publisher(spool_dir, sink, journal=Journal(journal_dir, Keyring([SECRET])))
    for i in range(5):
        publisher.publish(make_event(f"kept-{i}"))
    assert not publisher.shutdown(2)  # neither took them: before the journal, these were lost
    assert len(list(journal_dir.glob("journal-*"))) == 1
    # The process ends there (its thread, still retrying, goes with it).
    publisher._buffer.clear()
    publisher._wake.set()
    assert publisher._stopped.wait(WAIT)

    spool_dir.unlink()
    sink.down = False
    successor = make_publisher(spool_dir, sink, journal=Journal(journal_dir, Keyring([SECRET])))
    successor.start()
    wait_for(lambda: sorted(sink.ids()) == [f"kept-{i}" for i in range(5)], WAIT,
             "the kept events delivered", interval=0.01)
    assert successor.shutdown(WAIT)
    assert list(journal_dir.glob("journal-*")) == []


def test_replayed_events_go_to_the_spool_when_the_sink_is_down(tmp_path: Path) -> None:
    old = started(tmp_path / "journal")
    write(old, *(make_event(f"orphan-{i}") for i in range(4)))
    old.close(remove=False)
    sink = RecordingSink()
    sink.down = True
    publisher = make_publisher(tmp_path / "spool", sink, journal=Journal(tmp_path / "journal", Keyring([SECRET])))
    publisher.start()
    wait_for(lambda: publisher.counters["journal_replayed"] == 4, WAIT,
             "four journal records replayed", interval=0.01)
    assert len(list((tmp_path / "journal").glob("journal-*"))) == 1  # the orphan is gone, the own file stays
    assert publisher.counters["spooled"] == 4
    publisher.shutdown(2)


def test_a_refused_replay_keeps_the_rest_checkpointed_for_a_later_try(tmp_path: Path) -> None:
    old = started(tmp_path)
    write(old, *(make_event(f"r{i}") for i in range(5)))
    [path] = old.files()
    old.close(remove=False)
    assert recover_one(tmp_path, Keyring([SECRET]), Collected(refuse=True), batch_size=2).outcome == "failed"
    assert path.exists()
    collected = Collected()
    assert recover_one(tmp_path, Keyring([SECRET]), collected, batch_size=2).outcome == "replayed"
    assert collected.ids() == [f"r{i}" for i in range(5)]


def test_a_file_left_before_its_header_was_written_is_simply_removed(tmp_path: Path) -> None:
    empty = tmp_path / "journal-host-1-1-1.bin"
    empty.write_bytes(b"GMA")
    assert recover_one(tmp_path, Keyring([SECRET]), Collected(), batch_size=2).outcome == "replayed"
    assert not empty.exists()


def test_journal_files_are_private_to_the_gateway_user(tmp_path: Path) -> None:
    journal = started(tmp_path / "journal")
    [path] = journal.files()
    assert path.stat().st_mode & 0o077 == 0
    journal.close(remove=True)


def test_it_needs_a_secret() -> None:
    with pytest.raises(ValueError, match="DJANGO_SECRET_KEY"):
        Keyring([""])


def test_the_orphan_scan_skips_files_that_are_not_journals(tmp_path: Path) -> None:
    (tmp_path / "journal-x.bin.unreadable").write_bytes(b"whatever")
    (tmp_path / "notes.txt").write_text("hello")
    assert journal_recovery.orphans(tmp_path) == []
