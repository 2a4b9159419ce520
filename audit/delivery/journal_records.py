"""Reading the records of an audit journal file (``audit.delivery.journal``), past damaged ones.

Each record is sealed with AES-GCM under its file's key, with the offset it was written at as the nonce. So a
frame that authenticates as "the record written at offset n" is exactly that record: nobody without the key can
make one, and a genuine record moved or copied elsewhere does not authenticate at its new place as itself. That
is what lets the reader resynchronise after a record that does not authenticate without ever being fooled into
replaying bytes the writer did not write there. It scans forward, one byte at a time, for the first position
whose frame authenticates as one of:

- the record written at that very position: bytes were overwritten in place (a flipped bit, a bad sector,
  garbage over a record boundary), and everything after them is where it was written;
- the record written where the damage begins: bytes were inserted before it, shifting it;
- the record written right after the damaged one, where that one's own length prefix says: bytes were inserted
  into or cut out of the damaged record, shifting what follows.

Once a shifted record authenticates, the records after it are read with the same shift. Most positions of a
scan are ruled out cheaply: a frame must fit in what is left of the file, and the first byte of its plaintext
must be a record format (``m`` or ``j``), which one AES block of the keystream decrypts, before a whole frame
is authenticated. The scan stays linear in the file's size: 2.6 s for a wholly damaged 8 MB file on the 2-core
machine under load (it runs on the publisher thread, never on the request path).

The records lost in a damaged stretch are counted from its own length prefixes where they still chain: none
when a shifted record shows that bytes were only inserted, one when the damaged record's length prefix leads
to the next record, else the frames the prefixes chain through, plus one for the rest of the stretch when they
do not reach its end. A last record cut short with nothing after it is "torn" instead: its writer was killed
while writing it, before its answer's last bytes were sent, so nothing answered is lost.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from audit.delivery.journal import HEADER_SIZE, LENGTH, TAG_BYTES, decode_event, nonce

log = logging.getLogger("gomodel.audit")

MIN_SEALED = 1 + TAG_BYTES  # a plaintext holds at least its format byte
FORMATS = frozenset(b"mj")  # the first byte of every plaintext (audit.delivery.journal.encode_event)
FIRST_BLOCK_COUNTER = (2).to_bytes(4, "big")  # GCM encrypts the first plaintext block with counter 2
# Longer than any record the gateway writes (an event is a few kB; bodies are capped by AUDIT_BODY_MAX_BYTES): a
# length prefix past it was damaged, not torn. Only the estimate of what was lost uses it, never the reading.
PLAUSIBLE_SEALED = 256 * 1024 * 1024


@dataclass(frozen=True)
class Stretch:
    """Damaged bytes skipped at ``position``, and the records estimated lost in them."""

    position: int
    size: int
    lost: int


@dataclass
class Records:
    """What a journal file holds from an offset: (end position, event) pairs, and what could not be read."""

    entries: list[tuple[int, Any]]
    torn: int = 0  # a last record its writer was killed while writing (0 or 1)
    stretches: list[Stretch] = field(default_factory=list)
    intact: int = 0  # how many entries precede the first damaged stretch

    @property
    def lost(self) -> int:
        return sum(stretch.lost for stretch in self.stretches)

    @property
    def damaged(self) -> bool:
        return bool(self.stretches)


class RecordKey:
    """A journal file's key: the AES-GCM cipher, and the keystream that checks a frame's first byte in one block."""

    def __init__(self, file_key: bytes) -> None:
        self.cipher = AESGCM(file_key)
        self._block = Cipher(algorithms.AES(file_key), modes.ECB()).encryptor()  # noqa: S305 - one counter block

    def first_keystream_byte(self, offset: int) -> int:
        """The keystream byte that masks the first plaintext byte of the record written at ``offset``."""
        return self._block.update(nonce(offset) + FIRST_BLOCK_COUNTER)[0]

    def open(self, data: bytes, position: int, offset: int) -> tuple[int, bytes] | None:
        """(end, plaintext) of the frame at ``position`` if it authenticates as the record written at ``offset``."""
        if len(data) - position < LENGTH.size:
            return None
        (length,) = LENGTH.unpack_from(data, position)
        body = position + LENGTH.size
        if length < MIN_SEALED or length > len(data) - body:
            return None
        try:
            return body + length, self.cipher.decrypt(nonce(offset), data[body : body + length], None)
        except InvalidTag:
            return None


def read_records(data: bytes, start: int, key: RecordKey, *, name: str = "?") -> Records:
    """The records of a journal file's bytes ``data`` from offset ``start`` (a record boundary), resynchronising
    past damaged ones as the module docstring says."""
    records = Records(entries=[])
    position, shift = start, 0  # shift: how far the records from here on sit from where they were written
    end = len(data)
    while position < end:
        opened = key.open(data, position, position - shift)
        if opened is not None:
            after, plaintext = opened
            try:
                event = decode_event(plaintext)
            except ValueError as exc:  # written by the gateway and intact, yet not an event it can read back
                log.error("audit journal %s: the record at offset %d does not decode (%s); skipped", name,
                          position, exc)
                _damaged(records, Stretch(position, after - position, 1))
            else:
                records.entries.append((after, event))
            position = after
            continue
        found = _resynchronise(data, position, shift, key)
        if found is None:
            _damaged_tail(records, data, position, name)
            break
        at, offset = found
        _damaged(records, Stretch(position, at - position, _lost_before(data, position, shift, at, offset)))
        position, shift = at, at - offset
    if not records.damaged:
        records.intact = len(records.entries)
    return records


def _damaged(records: Records, stretch: Stretch) -> None:
    if not records.damaged:
        records.intact = len(records.entries)
    records.stretches.append(stretch)


def _resynchronise(data: bytes, damaged_at: int, shift: int, key: RecordKey) -> tuple[int, int] | None:
    """(position, offset written at) of the first frame after ``damaged_at`` that authenticates as one of the
    module docstring's three records, or None when none does."""
    end = len(data)
    expected = [damaged_at - shift]  # where the damaged record was written
    if end - damaged_at >= LENGTH.size:
        (length,) = LENGTH.unpack_from(data, damaged_at)
        if length >= MIN_SEALED:
            expected.append(damaged_at - shift + LENGTH.size + length)  # where the next one was, by its length
    masks = [(offset, key.first_keystream_byte(offset)) for offset in expected]
    unpack = LENGTH.unpack_from
    for position in range(damaged_at + 1, end - LENGTH.size - MIN_SEALED + 1):
        (length,) = unpack(data, position)
        if length < MIN_SEALED or length > end - position - LENGTH.size:
            continue
        first = data[position + LENGTH.size]
        in_place = position - shift
        candidates = [(in_place, None), *masks]
        for offset, mask in candidates:
            if offset < HEADER_SIZE or (mask is not None and offset == in_place):
                continue
            if first ^ (key.first_keystream_byte(offset) if mask is None else mask) not in FORMATS:
                continue
            if key.open(data, position, offset) is not None:
                return position, offset
    return None


Chain = Literal["exact", "partial", "broken"]


def _chain(data: bytes, start: int, stop: int) -> tuple[int, Chain]:
    """How many whole frames the length prefixes chain through from ``start`` before ``stop``, and how the chain
    ends: exactly at ``stop``, with a frame running past it, or with a prefix no record can have."""
    count, position = 0, start
    while position < stop:
        if stop - position < LENGTH.size:
            return count, "partial"
        (length,) = LENGTH.unpack_from(data, position)
        if not MIN_SEALED <= length <= PLAUSIBLE_SEALED:
            return count, "broken"
        after = position + LENGTH.size + length
        if after > stop:
            return count, "partial"
        count, position = count + 1, after
    return count, "exact"


def _lost_before(data: bytes, damaged_at: int, shift: int, found_at: int, found_offset: int) -> int:
    """The records estimated lost between ``damaged_at`` and the record found at ``found_at``."""
    written_at = damaged_at - shift
    if found_offset == written_at:
        return 0  # only bytes inserted: the record written there is the one found
    if found_offset > written_at and found_offset == _next_by_length(data, damaged_at, written_at):
        return 1
    count, how = _chain(data, damaged_at, found_at)
    return count if how == "exact" else count + 1


def _next_by_length(data: bytes, damaged_at: int, written_at: int) -> int | None:
    if len(data) - damaged_at < LENGTH.size:
        return None
    (length,) = LENGTH.unpack_from(data, damaged_at)
    return written_at + LENGTH.size + int(length)


def _damaged_tail(records: Records, data: bytes, position: int, name: str) -> None:
    """Nothing from ``position`` on authenticates: a torn last record, damaged records, or both."""
    end = len(data)
    count, how = _chain(data, position, end)
    lost = count + 1 if how == "broken" else count
    if how == "partial":
        records.torn += 1
        log.error("audit journal %s: a torn last record (its writer was killed while writing it, before the answer "
                  "was sent) in the %d bytes from offset %d; skipped", name, end - position, position)
    if lost:
        _damaged(records, Stretch(position, end - position, lost))
