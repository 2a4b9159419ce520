"""The publisher's on-disk spool: event batches that could not be delivered yet.

Each process appends to its own file (``audit-<host>-<pid>-<ns>-<n>.jsonl``, one JSON list of events per
line, fsync'd before ``append`` returns) and holds an exclusive ``flock`` on it while it is the active file.
Files rotate at ``max_file_bytes``. A file nobody holds is replayable: its writer rotated it away or died (a
lock dies with its process, even on SIGKILL), so any gateway process sharing the directory - the same one
after a restart, or a sibling worker - picks it up, under the same lock, so two never replay one file.

Replaying sends the file's batches in order and deletes the file; batches still unsent when delivery fails
again are first appended to the replaying process's own file. A crash in between can only send a batch
twice, which the worker's unique ``request_id`` makes harmless; no path deletes an unsent batch.

The directory holds at most ``max_total_bytes`` (``AUDIT_SPOOL_MAX_BYTES``, shared by every process using
it): an append past that raises ``SpoolFull``, as a full disk raises ``OSError``. A write that fails half-way
(disk full, file size limit) is cut back off the file, so a later append never lands behind a torn line.
The caller keeps a batch it could not spool; every write and fsync happens on the caller's thread, which in
the gateway is the publisher thread, never the event loop.
"""

from __future__ import annotations

import errno
import fcntl
import itertools
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

log = logging.getLogger("gomodel.audit")

Batch = list[dict[str, Any]]
DEFAULT_MAX_FILE_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_TOTAL_BYTES = 1024 * 1024 * 1024


class SpoolFull(OSError):
    """The spool directory already holds its cap (``max_total_bytes``); nothing was written."""

    def __init__(self, used: int, cap: int) -> None:
        super().__init__(errno.ENOSPC, f"the spool holds {used} bytes, its cap is {cap} (AUDIT_SPOOL_MAX_BYTES)")


def encode_batch(batch: Batch) -> bytes:
    """One batch as its spool line (JSON, newline-terminated)."""
    return json.dumps(batch, ensure_ascii=False, separators=(",", ":"), default=str).encode() + b"\n"


class Spool:
    """Append-only, fsync'd JSON-lines files of event batches under ``directory``."""

    def __init__(self, directory: Path, *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
                 max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES) -> None:
        self.directory = Path(directory)
        self.max_file_bytes = max_file_bytes
        self.max_total_bytes = max_total_bytes
        self._lock = threading.Lock()
        self._active: BinaryIO | None = None
        self._active_path: Path | None = None
        self._counter = itertools.count(1)
        self._host = "".join(c if c.isalnum() or c in "-_" else "_" for c in socket.gethostname())[:40]

    # -- writing -------------------------------------------------------------------------------------

    def append(self, batch: Batch) -> None:
        """Write one batch durably (fsync'd) to this process's active file."""
        self.append_lines([encode_batch(batch)])

    def append_lines(self, lines: list[bytes]) -> None:
        """Write already-encoded batch lines durably; each must end with a newline.

        Raises ``SpoolFull`` past the directory's cap and ``OSError`` when the disk refuses; either way
        nothing of ``lines`` stays in the file.
        """
        if not lines:
            return
        data = b"".join(lines)
        with self._lock:
            if self.max_total_bytes:
                used = self.pending_bytes()
                if used + len(data) > self.max_total_bytes:
                    raise SpoolFull(used, self.max_total_bytes)
            handle = self._open_active()
            fd = handle.fileno()
            start = os.fstat(fd).st_size
            try:
                _write_all(fd, data)
                os.fsync(fd)
            except OSError:
                self._cut_back(fd, start)
                raise
            if start + len(data) >= self.max_file_bytes:
                self._close_active()

    def _cut_back(self, fd: int, size: int) -> None:
        """Remove what a failed write left after ``size`` bytes; failing that, stop writing to the file.

        A file closed with a torn last line is still safe: replay discards a last line without its newline.
        """
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        except OSError:
            log.error("audit spool: cannot cut a failed write off %s; starting a new file", self._active_path)
            self._close_active()

    def _open_active(self) -> BinaryIO:
        if self._active is not None:
            return self._active
        self.directory.mkdir(parents=True, exist_ok=True)
        name = f"audit-{self._host}-{os.getpid()}-{time.time_ns()}-{next(self._counter)}.jsonl"
        path = self.directory / name
        # Unbuffered: a failed write must leave nothing in a buffer that a later flush would write after the cut.
        handle = open(path, "ab", buffering=0)  # noqa: SIM115 - kept open as the active file until rotated
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        _fsync_directory(self.directory)
        self._active, self._active_path = handle, path
        return handle

    def _close_active(self) -> None:
        if self._active is not None:
            self._active.close()  # releases the lock: the file becomes replayable
        self._active, self._active_path = None, None

    def rotate(self) -> None:
        """Close the active file, so it can be replayed."""
        with self._lock:
            self._close_active()

    def close(self) -> None:
        self.rotate()

    # -- reading -------------------------------------------------------------------------------------

    def files(self) -> list[Path]:
        """Spool files in the directory, oldest first (including ones other processes hold)."""
        try:
            return sorted(self.directory.glob("audit-*.jsonl"), key=_age_key)
        except OSError:
            return []

    def has_pending(self) -> bool:
        return bool(self.files())

    def pending_bytes(self) -> int:
        total = 0
        for path in self.files():
            try:
                total += path.stat().st_size
            except OSError:
                continue
        return total

    def oldest_created(self) -> float | None:
        """When the oldest spool file was started (unix seconds, from its name), or None when none is left."""
        oldest = None
        for path in self.files():
            started = _started_unix(path.name)
            if started is not None and (oldest is None or started < oldest):
                oldest = started
        return oldest

    def replay_one(self, send: Callable[[Batch], bool]) -> str:
        """Replay the oldest spool file nobody holds.

        ``send`` delivers one batch and returns False when delivery failed. Returns ``"empty"`` when there
        was nothing to replay, ``"sent"`` when a file was delivered and deleted, ``"failed"`` when delivery
        failed (the unsent rest is kept on disk).
        """
        with self._lock:
            if self._active is not None and os.fstat(self._active.fileno()).st_size > 0:
                self._close_active()
        for path in self.files():
            handle = _claim(path)
            if handle is None:
                continue
            with handle:
                return self._replay_claimed(path, handle, send)
        return "empty"

    def _replay_claimed(self, path: Path, handle: BinaryIO, send: Callable[[Batch], bool]) -> str:
        lines = handle.read().splitlines(keepends=True)
        result = "sent"
        changed = False  # whether the file can no longer be left as it was
        for number, line in enumerate(lines):
            if not line.endswith(b"\n"):
                # A torn final line: its writer died while writing it, before the batch was durable or
                # reported as spooled. Nothing follows it.
                log.error("audit spool %s: discarding a torn last line (%d bytes)", path.name, len(line))
                break
            try:
                batch = json.loads(line)
            except ValueError:
                log.error("audit spool %s: line %d is not JSON; kept in %s.bad", path.name, number + 1, path.name)
                _keep_bad_line(path, line)
                changed = True
                continue
            if not isinstance(batch, list):
                batch = [batch]
            if send(batch):
                changed = True
                continue
            if not changed:
                return "failed"  # nothing was sent: leave the file as it is for the next replay
            self.append_lines([raw for raw in lines[number:] if raw.endswith(b"\n")])
            result = "failed"
            break
        path.unlink(missing_ok=True)
        return result


def _claim(path: Path) -> BinaryIO | None:
    """The file opened and exclusively locked, or None when another process holds it or it is gone."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - returned to the caller, who closes it
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    if os.fstat(handle.fileno()).st_nlink == 0:  # replayed and deleted by another process meanwhile
        handle.close()
        return None
    return handle


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _keep_bad_line(path: Path, line: bytes) -> None:
    with open(path.with_name(path.name + ".bad"), "ab") as bad:
        bad.write(line)
        bad.flush()
        os.fsync(bad.fileno())


def _started_unix(name: str) -> float | None:
    """The creation time in a spool file's name (``audit-<host>-<pid>-<ns>-<n>.jsonl``; the host may hold ``-``)."""
    parts = name.rsplit("-", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    return int(parts[1]) / 1e9


def _age_key(path: Path) -> tuple[float, str]:
    try:
        return (path.stat().st_mtime, path.name)
    except OSError:
        return (0.0, path.name)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
