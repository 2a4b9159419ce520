"""A damaged audit journal file: every record that still authenticates at its place is replayed, the file is kept
aside, and the records lost are logged and counted (audit/delivery/journal_records.py,
audit/delivery/journal_recovery.py).

Real files, damaged the ways a disk or a filesystem damages them: bytes flipped inside one record, garbage over a
record boundary, bytes inserted between records, a record cut short in the middle, a file cut short.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from audit.delivery import journal_recovery
from audit.delivery.journal import HEADER_SIZE, LENGTH, Keyring
from audit.delivery.journal_recovery import recover_one
from tests.audit.events import make_event
from tests.audit.test_journal import SECRET, Collected, counted, started, write

LOST = "gomodel_audit_journal_records_lost_total"
TORN = "gomodel_audit_journal_torn_records_total"


def journaled(directory: Path, *ids: str) -> tuple[Path, list[int]]:
    """A dead process's journal file holding one record per id; the file and each record's start offset."""
    journal = started(directory)
    marks = write(journal, *(make_event(request_id) for request_id in ids))
    [path] = journal.files()
    journal.close(remove=False)
    ends = [mark[1] for mark in marks if mark is not None]
    assert len(ends) == len(ids)
    return path, [HEADER_SIZE, *ends[:-1]]


def rewrite(path: Path, change: bytes) -> None:
    path.write_bytes(change)


def kept_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("journal-*.bin.damaged-*"))


def recovered(directory: Path, caplog: pytest.LogCaptureFixture) -> tuple[journal_recovery.RecoveryResult, Collected]:
    collected = Collected()
    with caplog.at_level(logging.WARNING, logger="gomodel.audit"):
        result = recover_one(directory, Keyring([SECRET]), collected, batch_size=2)
    return result, collected


def damage_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.WARNING and "lost to damage" in r.getMessage()]


def test_it_skips_a_record_with_flipped_bytes_and_replays_every_record_after_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    path, starts = journaled(tmp_path, "first", "damaged", "third", "fourth")
    data = bytearray(path.read_bytes())
    for at in (starts[1] + LENGTH.size + 3, starts[1] + LENGTH.size + 40):
        data[at] ^= 0x5A
    rewrite(path, bytes(data))
    lost_before = counted(LOST)

    result, collected = recovered(tmp_path, caplog)

    assert collected.ids() == ["first", "third", "fourth"]
    assert (result.outcome, result.replayed, result.lost) == ("replayed", 3, 1)
    assert counted(LOST) == lost_before + 1
    [kept] = kept_files(tmp_path)
    assert not path.exists()
    assert kept.name.startswith(path.name + ".damaged-")
    assert kept.read_bytes()[HEADER_SIZE:] == bytes(data)[HEADER_SIZE:]  # kept as it was found, for a post-mortem
    [warning] = damage_warnings(caplog)
    assert "1 record" in warning.getMessage()
    assert str(kept) in warning.getMessage()


def test_it_resynchronises_past_garbage_written_over_a_record_boundary(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    path, starts = journaled(tmp_path, "first", "second", "third", "fourth", "fifth")
    data = bytearray(path.read_bytes())
    # From the middle of the second record to the middle of the third, the third's length prefix included.
    begin, end = starts[1] + 30, starts[2] + 50
    data[begin:end] = os.urandom(end - begin)
    rewrite(path, bytes(data))

    result, collected = recovered(tmp_path, caplog)

    assert collected.ids() == ["first", "fourth", "fifth"]
    assert result.lost == 2
    assert len(kept_files(tmp_path)) == 1
    assert "2 records" in damage_warnings(caplog)[0].getMessage()


def test_it_loses_nothing_to_garbage_inserted_between_two_records(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    path, starts = journaled(tmp_path, "first", "second", "third", "fourth")
    data = path.read_bytes()
    rewrite(path, data[: starts[2]] + os.urandom(37) + data[starts[2] :])

    result, collected = recovered(tmp_path, caplog)

    assert collected.ids() == ["first", "second", "third", "fourth"]
    assert result.lost == 0
    [kept] = kept_files(tmp_path)  # still a damaged file: kept aside and said so
    assert str(kept) in damage_warnings(caplog)[0].getMessage()


def test_it_resumes_after_a_record_cut_short_in_the_middle_of_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    path, starts = journaled(tmp_path, "first", "cut", "third", "fourth")
    data = path.read_bytes()
    cut_at = starts[1] + LENGTH.size + 25
    rewrite(path, data[:cut_at] + data[cut_at + 11 :])

    result, collected = recovered(tmp_path, caplog)

    assert collected.ids() == ["first", "third", "fourth"]
    assert result.lost == 1
    assert len(kept_files(tmp_path)) == 1


def test_a_file_cut_short_inside_a_record_replays_what_precedes_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    path, starts = journaled(tmp_path, "first", "second", "cut")
    os.truncate(path, starts[2] + LENGTH.size + 9)
    torn_before, lost_before = counted(TORN), counted(LOST)

    result, collected = recovered(tmp_path, caplog)

    # What its writer's kill mid-write leaves: the answer of that record was never sent, so nothing is lost.
    assert collected.ids() == ["first", "second"]
    assert (result.torn, result.lost) == (1, 0)
    assert (counted(TORN), counted(LOST)) == (torn_before + 1, lost_before)
    assert not path.exists()
    assert not kept_files(tmp_path)


def test_a_genuine_record_copied_to_another_place_is_not_replayed_from_there(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    path, starts = journaled(tmp_path, "same-size-1", "same-size-2", "same-size-3", "same-size-4")
    data = bytearray(path.read_bytes())
    first = bytes(data[starts[0] : starts[1]])
    assert len(first) == starts[3] - starts[2]
    data[starts[2] : starts[3]] = first  # a block of the file written over another one
    rewrite(path, bytes(data))

    result, collected = recovered(tmp_path, caplog)

    assert collected.ids() == ["same-size-1", "same-size-2", "same-size-4"]
    assert result.lost == 1


def test_a_damaged_file_whose_replay_is_refused_is_replayed_whole_later_and_counted_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    path, starts = journaled(tmp_path, "first", "damaged", "third", "fourth", "fifth")
    data = bytearray(path.read_bytes())
    data[starts[1] + LENGTH.size + 7] ^= 0xFF
    rewrite(path, bytes(data))
    lost_before = counted(LOST)

    refused = recover_one(tmp_path, Keyring([SECRET]), Collected(refuse=True), batch_size=2)
    assert refused.outcome == "failed"
    assert path.exists()
    assert not kept_files(tmp_path)

    result, collected = recovered(tmp_path, caplog)
    assert collected.ids() == ["first", "third", "fourth", "fifth"]
    assert counted(LOST) == lost_before + 1
    assert len(kept_files(tmp_path)) == 1


def test_it_keeps_only_the_newest_damaged_files(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    limit = journal_recovery.KEEP_DAMAGED_FILES
    for n in range(limit + 3):
        path, starts = journaled(tmp_path, f"a{n}", f"b{n}", f"c{n}")
        data = bytearray(path.read_bytes())
        data[starts[1] + LENGTH.size + 5] ^= 0x01
        rewrite(path, bytes(data))
        result, _ = recovered(tmp_path, caplog)
        assert result.lost == 1
        newest = result.kept
    kept = kept_files(tmp_path)
    assert len(kept) == limit
    assert newest in kept
