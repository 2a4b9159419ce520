"""Replaying the journal of a gateway process that died (see ``audit.journal`` for the journal itself).

A journal file nobody holds a lock on is an orphan: its writer died (the kernel releases an ``flock`` even on
SIGKILL) or deleted it. Whichever process sharing the directory claims it first - the same gateway after a
restart, at start-up, or a live sibling, which looks every 30 s - replays it from its checkpoint through the
publisher's normal path (prepare, then the sink, or the spool when the sink fails) and deletes it. The events
it holds may already have been delivered (the checkpoint is written after a batch is handled, so a kill in
between leaves it behind): a second delivery is harmless, since the worker stores each ``request_id`` once.

What cannot be read is never passed over silently:

- a torn last record (its writer was killed while writing it, so its answer was never sent) or a record that
  does not decrypt (a damaged disk): skipped, counted in ``gomodel_audit_journal_torn_records_total`` and
  logged; reading stops there, since nothing after a damaged record can be trusted to be aligned;
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from audit import metrics
from audit.journal import (
    CHECKPOINT,
    CHECKPOINT_AT,
    FILE_GLOB,
    HEADER,
    HEADER_SIZE,
    LENGTH,
    MAGIC,
    VERSION,
    Keyring,
    decode_event,
    nonce,
)

log = logging.getLogger("gomodel.audit")

UNREADABLE_SUFFIX = ".unreadable"

Outcome = Literal["empty", "replayed", "failed", "unreadable"]


@dataclass
class Records:
    """What a journal file holds after its checkpoint: (end offset, event) pairs, and the records skipped."""

    entries: list[tuple[int, Any]]
    torn: int = 0


@dataclass
class RecoveryResult:
    outcome: Outcome
    path: Path | None = None
    replayed: int = 0
    torn: int = 0


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


def read_records(data: bytes, start: int, cipher: AESGCM, *, name: str = "?") -> Records:
    """The records of a journal file's bytes ``data`` from offset ``start``; stops at a torn or damaged one."""
    records = Records(entries=[])
    offset = start
    end = len(data)
    while offset < end:
        if end - offset < LENGTH.size:
            log.error("audit journal %s: a torn last record at offset %d (%d bytes; its writer was killed while "
                      "writing it, before the answer was sent); skipped", name, offset, end - offset)
            records.torn += 1
            break
        (length,) = LENGTH.unpack_from(data, offset)
        body = offset + LENGTH.size
        if length > end - body:
            log.error("audit journal %s: a torn last record at offset %d (%d of %d bytes; its writer was killed "
                      "while writing it, before the answer was sent); skipped", name, offset, end - body, length)
            records.torn += 1
            break
        try:
            event = decode_event(cipher.decrypt(nonce(offset), data[body : body + length], None))
        except (InvalidTag, ValueError) as exc:
            log.error("audit journal %s: the record at offset %d does not decrypt or decode (%s); %d bytes from "
                      "there on skipped", name, offset, type(exc).__name__ if isinstance(exc, InvalidTag) else exc,
                      end - offset)
            records.torn += 1
            break
        offset = body + length
        records.entries.append((offset, event))
    return records


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
    records = read_records(data, min(max(checkpoint, HEADER_SIZE), len(data)), Keyring.file_cipher(key, salt),
                           name=path.name)
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
        with contextlib.suppress(OSError):  # so that a crash during a long replay does not send everything again
            os.pwrite(fd, CHECKPOINT.pack(batch[-1][0]), CHECKPOINT_AT)
    path.unlink(missing_ok=True)
    if replayed or records.torn:
        skipped = f" ({records.torn} unreadable record skipped)" if records.torn else ""
        log.warning("audit journal %s: replayed %d events of a gateway process that died before delivering "
                    "them%s", path.name, replayed, skipped)
    return RecoveryResult("replayed", path, replayed, records.torn)


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
    chunks = []
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
