"""Replaying the journal of a gateway process that died (see ``audit.delivery.journal`` for the journal itself).

A journal file nobody holds a lock on is an orphan: its writer died (the kernel releases an ``flock`` even on
SIGKILL) or deleted it. Whichever process sharing the directory claims it first - the same gateway after a
restart, at start-up, or a live sibling, which looks every 30 s - replays it from its checkpoint through the
publisher's normal path (prepare, then the sink, or the spool when the sink fails) and deletes it. The events
it holds may already have been delivered (the checkpoint is written after a batch is handled, so a kill in
between leaves it behind): a second delivery is harmless, since the worker stores each ``request_id`` once.

What cannot be read is never passed over silently:

- a torn last record (its writer was killed while writing it, so its answer was never sent): skipped, counted
  in ``gomodel_audit_journal_torn_records_total`` and logged; the file is deleted once replayed, as usual;
- damaged records (a damaged disk or filesystem): skipped up to the next record that authenticates at its place
  (``audit.delivery.journal_records``), so every intact record after them is still replayed. The file is then kept aside
  as ``<file>.damaged-<UTC time>`` (the newest ``KEEP_DAMAGED_FILES`` of them; older ones are deleted), the
  records lost are counted in ``gomodel_audit_journal_records_lost_total`` and one warning names their number
  and the kept file;
- a file sealed under another secret (``DJANGO_SECRET_KEY`` changed and the old one is not in
  ``SECRET_KEY_FALLBACKS``) or that is no journal at all: renamed ``<file>.unreadable``, counted in
  ``gomodel_audit_journal_unreadable_files_total`` and logged at error level with what to do. Nothing of it is
  replayed or deleted.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from audit import metrics
from audit.delivery.journal import CHECKPOINT, CHECKPOINT_AT, FILE_GLOB, HEADER, HEADER_SIZE, MAGIC, VERSION, Keyring
from audit.delivery.journal_records import RecordKey, Records, read_records

__all__ = ["KEEP_DAMAGED_FILES", "RecordKey", "Records", "RecoveryResult", "orphans", "read_records", "recover_one"]

log = logging.getLogger("gomodel.audit")

UNREADABLE_SUFFIX = ".unreadable"
DAMAGED_SUFFIX = ".damaged-"
# Damaged files kept for a post-mortem, per directory: enough to compare a few, bounded so that a failing disk
# does not fill the volume with them.
KEEP_DAMAGED_FILES = 10

Outcome = Literal["empty", "replayed", "failed", "unreadable"]


@dataclass
class RecoveryResult:
    outcome: Outcome
    path: Path | None = None
    replayed: int = 0
    torn: int = 0
    lost: int = 0  # records lost to damage (counted once, when the file is kept aside)
    kept: Path | None = None  # where a damaged file was kept


def orphans(directory: Path, *, skip: Callable[[Path], bool] = lambda path: False) -> list[Path]:
    """Journal files in ``directory``, oldest first, except those ``skip`` names (this process's own)."""
    try:
        paths = [p for p in directory.glob(FILE_GLOB) if not skip(p)]
    except OSError:
        return []
    return sorted(paths, key=_age_key)


def recover_one(directory: Path, keyring: Keyring, deliver: Callable[[list[Any]], bool], *, batch_size: int,
                skip: Callable[[Path], bool] = lambda path: False) -> RecoveryResult:
    """Replay the oldest orphaned journal file of ``directory``.

    ``deliver`` hands a list of raw events on (to the sink, or the spool) and returns False when neither took
    them; the file then keeps the rest, checkpointed, for a later try. Returns ``"empty"`` when no file was
    orphaned, ``"replayed"`` when one was replayed and deleted, ``"failed"`` when delivery stopped half-way,
    ``"unreadable"`` when one was set aside.
    """
    for path in orphans(directory, skip=skip):
        fd = _claim(path)
        if fd is None:
            continue
        try:
            return _replay(path, fd, keyring, deliver, batch_size)
        finally:
            os.close(fd)
    return RecoveryResult("empty")


def _replay(path: Path, fd: int, keyring: Keyring, deliver: Callable[[list[Any]], bool],
            batch_size: int) -> RecoveryResult:
    data = _read_all(fd)
    if len(data) < HEADER_SIZE:
        # Its process died while creating it, before the first record: nothing to replay.
        path.unlink(missing_ok=True)
        return RecoveryResult("replayed", path)
    magic, version, salt, key_id, checkpoint = HEADER.unpack_from(data, 0)
    if magic != MAGIC or version != VERSION:
        return _set_aside(path, f"it is not an audit journal of this version (magic {magic!r}, version {version})")
    key = keyring.get(key_id)
    if key is None:
        return _set_aside(path, "it was sealed under another secret key than DJANGO_SECRET_KEY (or the fallbacks "
                                "in SECRET_KEY_FALLBACKS): the key changed since its process wrote it")
    records = read_records(data, min(max(checkpoint, HEADER_SIZE), len(data)),
                           RecordKey(Keyring.file_key(key, salt)), name=path.name)
    if records.torn:
        metrics.JOURNAL_TORN.inc(records.torn)
    replayed = 0
    entries = records.entries
    for start in range(0, len(entries), max(1, batch_size)):
        batch = entries[start : start + batch_size]
        if not deliver([event for _, event in batch]):
            log.warning("audit journal %s: delivery and the spool both failed after %d replayed events; the rest "
                        "is kept for a later try", path.name, replayed)
            return RecoveryResult("failed", path, replayed, records.torn)
        replayed += len(batch)
        metrics.JOURNAL_REPLAYED.inc(len(batch))
        # So that a crash during a long replay does not send everything again. Not past damage: a checkpoint is
        # a record boundary read without the shift the resynchronisation found, and a later try must find it too.
        if start + len(batch) <= records.intact:
            with contextlib.suppress(OSError):
                os.pwrite(fd, CHECKPOINT.pack(batch[-1][0]), CHECKPOINT_AT)
    if records.damaged:
        return _keep_damaged(path, records, replayed)
    path.unlink(missing_ok=True)
    if replayed or records.torn:
        skipped = f" ({records.torn} torn record skipped)" if records.torn else ""
        log.warning("audit journal %s: replayed %d events of a gateway process that died before delivering "
                    "them%s", path.name, replayed, skipped)
    return RecoveryResult("replayed", path, replayed, records.torn)


def _keep_damaged(path: Path, records: Records, replayed: int) -> RecoveryResult:
    """Rename a replayed damaged file aside (no longer an orphan to replay), count and log what it lost."""
    now_ns = time.time_ns()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now_ns // 10**9)) + f".{now_ns % 10**9:09d}Z"
    target = path.with_name(f"{path.name}{DAMAGED_SUFFIX}{stamp}")
    kept: Path | None = target
    try:
        os.replace(path, target)
    except OSError as exc:  # replayed already: deleting it is what keeps it from being replayed twice
        log.error("audit journal %s: cannot keep the damaged file aside (%s); deleting it", path.name, exc)
        path.unlink(missing_ok=True)
        kept = None
    lost = records.lost
    metrics.JOURNAL_LOST.inc(lost)
    skipped = sum(stretch.size for stretch in records.stretches)
    log.warning("audit journal %s: %d %s lost to damage (%d damaged %s, %d bytes, from offset %d); the %d intact "
                "events after the damage were replayed too (%d in all); the damaged file is kept as %s",
                path.name, lost, "record" if lost == 1 else "records", len(records.stretches),
                "stretch" if len(records.stretches) == 1 else "stretches", skipped, records.stretches[0].position,
                replayed - records.intact, replayed, kept if kept is not None else "(not kept: the rename failed)")
    if kept is not None:
        _prune_damaged(path.parent)
    return RecoveryResult("replayed", path, replayed, records.torn, lost, kept)


def _prune_damaged(directory: Path) -> None:
    """Delete all but the newest KEEP_DAMAGED_FILES damaged files of ``directory``."""
    try:
        damaged = sorted(directory.glob(f"{FILE_GLOB}{DAMAGED_SUFFIX}*"),
                         key=lambda path: path.name.rsplit(DAMAGED_SUFFIX, 1)[1])  # by when it was kept
    except OSError:
        return
    for old in damaged[: max(0, len(damaged) - KEEP_DAMAGED_FILES)]:
        with contextlib.suppress(OSError):
            old.unlink()


def _set_aside(path: Path, why: str) -> RecoveryResult:
    target = path.with_name(path.name + UNREADABLE_SUFFIX)
    try:
        os.replace(path, target)
    except OSError as exc:
        log.error("audit journal %s: cannot rename it aside (%s)", path.name, exc)
    metrics.JOURNAL_UNREADABLE.inc()
    log.error("AUDIT JOURNAL NOT REPLAYED: %s cannot be read because %s. Its audit events are NOT recorded. It was "
              "renamed %s; to replay it, run a gateway with the secret key it was written under (as "
              "DJANGO_SECRET_KEY, or in SECRET_KEY_FALLBACKS) and rename it back to %s", path, why, target.name,
              path.name)
    return RecoveryResult("unreadable", path)


def _claim(path: Path) -> int | None:
    """``path`` opened and exclusively locked, or None when its writer still holds it or it is gone."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    if os.fstat(fd).st_nlink == 0:  # replayed and deleted by another process, or deleted by its writer, meanwhile
        os.close(fd)
        return None
    return fd


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    while True:
        chunk = os.pread(fd, 1024 * 1024, offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)


def _age_key(path: Path) -> tuple[float, str]:
    try:
        return (path.stat().st_mtime, path.name)
    except OSError:
        return (0.0, path.name)
