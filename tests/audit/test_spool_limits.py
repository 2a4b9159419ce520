"""The spool's limits: its size cap, and a disk that fills up in the middle of a write.

A full disk is produced for real in a child process with a file-size limit (RLIMIT_FSIZE: a write past it
stops short, then fails with EFBIG, as one on a full disk does with ENOSPC); the parent then replays what the
child left.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from audit.delivery.spool import Spool, SpoolFull, encode_batch
from tests.audit.events import make_event
from tests.audit.procs import REPO

WHEN = 1764460000.5  # a fixed time: every batch of the same shape encodes to the same length


def batch(prefix: str, n: int = 5) -> list[dict[str, object]]:
    return [make_event(f"{prefix}-{i}", created_at=WHEN) for i in range(n)]


def replayed_ids(directory: Path) -> list[str]:
    got: list[str] = []
    spool = Spool(directory)
    while spool.replay_one(lambda b: got.extend(e["request_id"] for e in b) or True) != "empty":
        pass
    return got


def test_it_refuses_a_batch_past_its_cap_and_writes_nothing_of_it(tmp_path: Path) -> None:
    one_line = len(encode_batch(batch("a")))
    spool = Spool(tmp_path, max_total_bytes=3 * one_line)
    for prefix in ("a", "b", "c"):
        spool.append(batch(prefix))
    with pytest.raises(SpoolFull) as refused:
        spool.append(batch("d"))
    assert "AUDIT_SPOOL_MAX_BYTES" in str(refused.value)
    spool.close()
    assert sum(p.stat().st_size for p in tmp_path.glob("audit-*.jsonl")) == 3 * one_line
    assert sorted(replayed_ids(tmp_path)) == sorted(e["request_id"] for p in "abc" for e in batch(p))


def test_a_cap_is_shared_by_every_process_writing_the_directory(tmp_path: Path) -> None:
    one_line = len(encode_batch(batch("a")))
    first, second = Spool(tmp_path, max_total_bytes=2 * one_line), Spool(tmp_path, max_total_bytes=2 * one_line)
    try:
        first.append(batch("a"))
        second.append(batch("b"))
        with pytest.raises(SpoolFull):
            first.append(batch("c"))
    finally:
        first.close()
        second.close()


CHILD = textwrap.dedent("""
    import json, resource, sys
    from pathlib import Path
    from audit.delivery.spool import Spool
    from tests.audit.events import make_event

    directory, limit = Path(sys.argv[1]), int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # Python ignores SIGXFSZ: writes fail instead
    spool = Spool(directory)
    outcome = {}
    for n in range(40):
        events = [make_event(f"b{n}-{i}", created_at=1764460000.5) for i in range(5)]
        try:
            spool.append(events)
            outcome[f"b{n}"] = "spooled"
        except OSError as exc:
            outcome[f"b{n}"] = f"refused: {exc.strerror}"
    print(json.dumps(outcome))
""")


def test_a_write_that_fills_the_disk_is_cut_back_and_later_batches_are_refused_cleanly(tmp_path: Path) -> None:
    line = len(encode_batch(batch("b0")))
    limit = int(line * 6.5)  # room for six batches and half of a seventh
    child = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), str(limit)], cwd=REPO, env={
        "PYTHONPATH": str(REPO), "DJANGO_SETTINGS_MODULE": "tests.settings", "PATH": "/usr/bin:/bin",
    }, capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    outcome = json.loads(child.stdout)
    spooled = [b for b, result in outcome.items() if result == "spooled"]
    assert spooled == [f"b{n}" for n in range(6)]
    assert set(outcome.values()) == {"spooled", "refused: File too large"}
    [path] = tmp_path.glob("audit-*.jsonl")
    # The half-written seventh batch was cut off again: the file ends at a whole line, so nothing later lands
    # behind a torn one, and every batch reported as spooled replays.
    assert path.stat().st_size == 6 * line
    assert path.read_bytes().endswith(b"\n")
    assert sorted(replayed_ids(tmp_path)) == sorted(f"{b}-{i}" for b in spooled for i in range(5))
