"""The audit journal: each gateway process's encrypted, append-only record of the events it published and has
not yet seen delivered or spooled, so that a process killed outright (SIGKILL, the OOM killer) loses no audit
event of an answer its client received.

Why a write per request: the publisher keeps events in memory for up to one flush interval before it delivers
or spools them, and a SIGKILL takes memory away. ``Journal.append`` runs on the request path - before the
answer's last bytes are sent - and costs one ``pwrite``: the event is serialised (``marshal``), sealed with
AES-256-GCM and written. The write lands in the kernel's page cache, which outlives the process, so a killed
process has lost nothing it wrote. A power cut or a kernel crash can still lose what the kernel had not written
back; with ``AUDIT_JOURNAL_FSYNC`` the publisher thread ``fdatasync``s the file once per round, which bounds
that loss to the last round (one flush interval) whatever the thread's backlog.

The publisher thread checkpoints the journal once the events up to a record are delivered or spooled (the spool
is durable itself), rotates a full file and deletes a file whose every record is checkpointed, so the journal
holds about what is in memory. Recovery - a dead process's journal replayed from its checkpoint - is in
``audit.delivery.journal_recovery``.

Raw prompts never reach the disk in clear: every record is encrypted under a key derived (HKDF-SHA256) from
the gateway's ``SECRET_KEY`` (``DJANGO_SECRET_KEY``), which every replica shares, so a restarted process can
read it and nobody without the secret can. Each file has a random salt and its own key derived from it; a
record's nonce is its offset in the file, unique within the file and binding the record to its place. A file
whose write failed is never written again (a new file is opened instead), so no nonce is ever used twice.

File layout (``journal-<host>-<pid>-<ns>-<n>.bin`` in ``AUDIT_JOURNAL_DIR``; the writer holds an exclusive
``flock`` on it until it deletes it, and the kernel releases that lock when the process dies, even on
SIGKILL - an unlocked file is an orphan)::

    header (48 bytes): b"GMAJ", version 1, 3 zero bytes, salt (16), key id (8),
                       checkpoint (u64 LE: every record before this offset is delivered or spooled), 8 zero bytes
    record:            u32 LE length of the sealed bytes, then AES-256-GCM(file key, nonce = offset, plaintext)
    plaintext:         b"m" + marshal.dumps(event)  (plain dicts, lists, strings, numbers: the usual event)
                    or b"j" + JSON                  (anything marshal refuses, stringified like the spool does)

``marshal`` reads only records that decrypted and authenticated, that is records someone holding the secret
wrote; it is about five times faster than ``json`` on an event, and the event is the request path's cost.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import json
import logging
import marshal
import os
import socket
import struct
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

log = logging.getLogger("gomodel.audit")

MAGIC = b"GMAJ"
VERSION = 1
HEADER = struct.Struct("<4sB3x16s8sQ8x")  # magic, version, salt, key id, checkpoint
HEADER_SIZE = HEADER.size  # 48
CHECKPOINT_AT = 32  # the checkpoint's offset inside the header
CHECKPOINT = struct.Struct("<Q")
LENGTH = struct.Struct("<I")
TAG_BYTES = 16
FILE_GLOB = "journal-*.bin"
DEFAULT_MAX_BYTES = 256 * 1024 * 1024  # AUDIT_BUFFER_MAX_EVENTS (50,000) events of ~4 kB, with room to spare
DEFAULT_MAX_FILE_BYTES = 8 * 1024 * 1024
REOPEN_SECONDS = 5.0  # after a failed open or write, how long the thread waits before it opens a new file

# A position in the journal: the file, and the offset just after a record. The publisher carries one with
# every buffered event and hands the last of a handled batch to ``checkpoint``.
Mark: TypeAlias = "tuple[Segment, int]"


# ------------------------------------------------------------------------------------------------------
# Keys
# ------------------------------------------------------------------------------------------------------


def _hkdf(material: bytes, *, salt: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=info).derive(material)


class Keyring:
    """The journal key of the current secret (for writing) and of the fallbacks (for reading only)."""

    def __init__(self, secrets: Sequence[str]) -> None:
        keys = [_hkdf(s.encode(), salt=b"gomodel audit journal", info=b"journal key v1") for s in secrets if s]
        if not keys:
            raise ValueError("the audit journal needs a secret key (DJANGO_SECRET_KEY)")
        self.current = keys[0]
        self.current_id = self.key_id(keys[0])
        self._by_id = {self.key_id(k): k for k in reversed(keys)}

    @staticmethod
    def key_id(key: bytes) -> bytes:
        """8 bytes naming a key without revealing it: a file says which secret sealed it."""
        return hashlib.sha256(b"gomodel audit journal key id\x00" + key).digest()[:8]

    def get(self, key_id: bytes) -> bytes | None:
        return self._by_id.get(key_id)

    @staticmethod
    def file_key(key: bytes, salt: bytes) -> bytes:
        """The AES-256 key of the file with ``salt`` (the reader's resynchronisation also needs it raw)."""
        return _hkdf(key, salt=salt, info=b"gomodel audit journal file v1")

    @staticmethod
    def file_cipher(key: bytes, salt: bytes) -> AESGCM:
        return AESGCM(Keyring.file_key(key, salt))


def nonce(offset: int) -> bytes:
    """A record's nonce: its offset in its file (12 bytes, big-endian)."""
    return offset.to_bytes(12, "big")


def encode_event(event: Any) -> bytes:
    """The plaintext of a record: marshal for the usual plain event, JSON for anything else."""
    try:
        return b"m" + marshal.dumps(event)
    except ValueError:  # an object marshal does not know (a str subclass, a dataclass...)
        return b"j" + json.dumps(event, ensure_ascii=False, separators=(",", ":"), default=str).encode()


def decode_event(plaintext: bytes) -> Any:
    """The event of a decrypted record; ValueError when it is neither format."""
    kind, body = plaintext[:1], plaintext[1:]
    if kind == b"m":
        try:
            return marshal.loads(body)  # noqa: S302 - only records that authenticated under the secret get here
        except (EOFError, TypeError) as exc:
            raise ValueError(f"a marshal record that does not load: {exc}") from None
    if kind == b"j":
        return json.loads(body)
    raise ValueError(f"unknown record format {kind!r}")


# ------------------------------------------------------------------------------------------------------
# Writing
# ------------------------------------------------------------------------------------------------------


@dataclass(eq=False)
class Segment:
    """One journal file this process writes or still holds."""

    path: Path
    fd: int
    cipher: AESGCM
    size: int  # bytes written, header included: the next record's offset
    checkpoint: int
    broken: bool = False  # a write failed: never written again (its nonces would repeat)
    closed: bool = False


@dataclass
class JournalStats:
    bytes_written: int = 0
    records: int = 0
    skipped: dict[str, int] = field(default_factory=lambda: {"write_failed": 0, "full": 0, "unavailable": 0})


class Journal:
    """This process's journal files under ``directory``; see the module docstring.

    ``append`` is the request path's (any thread); everything else is the publisher thread's.
    """

    def __init__(self, directory: Path, keyring: Keyring, *, max_bytes: int = DEFAULT_MAX_BYTES,
                 max_file_bytes: int | None = None, fsync: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.directory = Path(directory)
        self.keyring = keyring
        self.max_bytes = max_bytes
        self.max_file_bytes = max_file_bytes or max(64 * 1024, min(DEFAULT_MAX_FILE_BYTES, max_bytes // 8))
        self.fsync = fsync
        self._clock = clock
        self._lock = threading.Lock()
        self._segments: list[Segment] = []  # oldest first; the last is the active one unless it is broken
        self._active: Segment | None = None
        self._retained = 0  # bytes of the files still held
        self._closed = False
        self._next_open = 0.0
        self._open_failing = False
        self._counter = itertools.count(1)
        self._host = "".join(c if c.isalnum() or c in "-_" else "_" for c in socket.gethostname())[:40]
        self.stats = JournalStats()
        self.last_error: OSError | None = None
        _OPEN_JOURNALS.add(self)

    # -- the request path -----------------------------------------------------------------------------

    def append(self, event: Any, hand_on: Callable[[tuple[Any, Mark | None]], None]) -> None:
        """Write ``event``'s record, then call ``hand_on((event, mark))`` under the same lock.

        The lock makes the order of ``hand_on`` calls the order of the records, so that the publisher, which
        handles its buffer in order, may checkpoint up to the last event of a handled batch. ``mark`` is None
        when the event could not be journaled (counted in ``stats.skipped``; it stays in memory only). Never
        raises for a bad event or a failed write.
        """
        try:
            plaintext = encode_event(event)
        except (ValueError, TypeError, RecursionError):  # not even JSON can hold it: the thread will say so
            plaintext = None
        with self._lock:
            mark = None if plaintext is None else self._write(plaintext)
            hand_on((event, mark))

    def _write(self, plaintext: bytes) -> Mark | None:
        segment = self._active
        if segment is None:
            self.stats.skipped["unavailable"] += 1
            return None
        offset = segment.size
        size = LENGTH.size + len(plaintext) + TAG_BYTES
        if self._retained + size > self.max_bytes:
            self.stats.skipped["full"] += 1
            return None
        sealed = segment.cipher.encrypt(nonce(offset), plaintext, None)
        try:
            written = os.pwrite(segment.fd, LENGTH.pack(len(sealed)) + sealed, offset)
        except OSError as exc:
            written, self.last_error = -1, exc
        if written != size:
            self._break(segment)
            self.stats.skipped["write_failed"] += 1
            return None
        segment.size = offset + size
        self._retained += size
        self.stats.bytes_written += size
        self.stats.records += 1
        return segment, segment.size

    def _break(self, segment: Segment) -> None:
        """Stop writing to ``segment`` after a failed write: cut the partial record off, if the disk lets us."""
        segment.broken = True
        self._active = None
        with contextlib.suppress(OSError):  # the reader skips a torn tail anyway
            os.ftruncate(segment.fd, segment.size)

    # -- the publisher thread -------------------------------------------------------------------------

    def start(self) -> bool:
        """Open this process's first file; False (logged) when the directory refuses, retried by ``maintain``."""
        self._open_new()
        return self._active is not None

    def maintain(self) -> None:
        """One round's upkeep: reopen after a failure, rotate a full file, fdatasync when configured."""
        active = self._active
        if self._closed:
            return
        if (active is None or active.size >= self.max_file_bytes) and self._clock() >= self._next_open:
            self._open_new()
        active = self._active
        if self.fsync and active is not None:
            try:
                os.fdatasync(active.fd)
            except OSError as exc:
                log.error("audit journal: fdatasync of %s failed (%s)", active.path.name, exc)
        self._drop_handled()

    def checkpoint(self, mark: Mark) -> None:
        """Every record up to ``mark`` is delivered or spooled: record that, and drop files wholly handled."""
        segment, end = mark
        with self._lock:  # held for the write too: a file closed meanwhile would leave its number to another
            if segment.closed or end <= segment.checkpoint:
                return
            segment.checkpoint = end
            # The publisher handles its buffer in order: every record of an older file was handled before.
            for older in self._segments[: self._segments.index(segment)]:
                older.checkpoint = older.size
            try:
                os.pwrite(segment.fd, CHECKPOINT.pack(end), CHECKPOINT_AT)
            except OSError as exc:  # a stale checkpoint only means a second delivery after a crash
                log.warning("audit journal: cannot write the checkpoint of %s (%s)", segment.path.name, exc)
        self._drop_handled()

    def close(self, *, remove: bool) -> None:
        """Release every file; ``remove`` deletes them (everything was delivered or spooled), otherwise they
        stay for the next process to replay from their checkpoints."""
        with self._lock:
            self._closed = True
            self._active = None
            segments = [s for s in self._segments if _mark_closed(s)]
            self._segments = []
            self._retained = 0
        for segment in segments:
            _dispose(segment, remove=remove)
        _OPEN_JOURNALS.discard(self)

    def owns(self, path: Path) -> bool:
        with self._lock:
            return any(s.path == path for s in self._segments)

    @property
    def retained_bytes(self) -> int:
        return self._retained

    def files(self) -> list[Path]:
        with self._lock:
            return [s.path for s in self._segments]

    # -- files ----------------------------------------------------------------------------------------

    def _open_new(self) -> None:
        try:
            segment = self._create()
        except OSError as exc:
            self.last_error = exc
            self._next_open = self._clock() + REOPEN_SECONDS
            if not self._open_failing:
                log.error("audit journal: cannot open a journal file in %s (%s); audit events wait in memory "
                          "only, as without a journal, until it can", self.directory, exc)
            self._open_failing = True
            return
        if self._open_failing:
            log.warning("audit journal: writing to %s again", self.directory)
        self._open_failing = False
        with self._lock:
            closing = self._closed
            if not closing:
                self._segments.append(segment)
                self._active = segment
                self._retained += segment.size
        if closing:
            _dispose(segment, remove=True)
        self._drop_handled()

    def _create(self) -> Segment:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        name = f"journal-{self._host}-{os.getpid()}-{time.time_ns()}-{next(self._counter)}.bin"
        path = self.directory / name
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            salt = os.urandom(16)
            header = HEADER.pack(MAGIC, VERSION, salt, self.keyring.current_id, HEADER_SIZE)
            if os.pwrite(fd, header, 0) != HEADER_SIZE:
                raise OSError(f"a short write of the header of {path}")
        except BaseException:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        cipher = Keyring.file_cipher(self.keyring.current, salt)
        return Segment(path=path, fd=fd, cipher=cipher, size=HEADER_SIZE, checkpoint=HEADER_SIZE)

    def _drop_handled(self) -> None:
        """Delete the files no longer written whose every record is checkpointed."""
        with self._lock:
            done = [s for s in self._segments if s is not self._active and s.checkpoint >= s.size]
            for segment in done:
                self._segments.remove(segment)
                self._retained -= segment.size
                _mark_closed(segment)
        for segment in done:
            _dispose(segment, remove=True)

    def _forget_after_fork(self) -> None:
        """A forked child does not own its parent's files: close its copies (the parent's lock stays)."""
        for segment in self._segments:
            if not segment.closed:
                segment.closed = True
                with contextlib.suppress(OSError):
                    os.close(segment.fd)
        self._segments, self._active, self._closed = [], None, True
        self._lock = threading.Lock()  # another thread of the parent may have held it at the fork


def _mark_closed(segment: Segment) -> bool:
    """Mark ``segment`` closed (under the journal's lock, so no write or checkpoint uses it after); False if it was."""
    if segment.closed:
        return False
    segment.closed = True
    return True


def _dispose(segment: Segment, *, remove: bool) -> None:
    """Delete (when ``remove``) and close a segment already marked closed."""
    if remove:
        # Unlinked before the lock goes with the close: no other process can claim a file being deleted.
        segment.path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        os.close(segment.fd)


_OPEN_JOURNALS: weakref.WeakSet[Journal] = weakref.WeakSet()


def _close_inherited_journals() -> None:
    for journal in list(_OPEN_JOURNALS):
        journal._forget_after_fork()
    _OPEN_JOURNALS.clear()


os.register_at_fork(after_in_child=_close_inherited_journals)
