"""Random ids for requests and attempts: 32 lower-case hex characters, as ``uuid.uuid4().hex`` spells them.

Every request takes two (its own and its attempt's). Each id is 16 bytes of ``os.urandom`` spelt in hex, as
before, but the bytes are read 4 KiB at a time: one ``getrandom`` system call serves 256 ids instead of one,
and the request path pays for a ``list.pop``. The bytes are the same kernel CSPRNG output, each handed out
once; nothing reads an id's version bits, so all 128 of them are random.

The ids wait in a plain list: ``pop`` and ``extend`` are each atomic under the GIL, so threads sharing the
pool never get the same id, and two threads refilling it at once only add more fresh ids. A forked child
empties its copy before it runs (``os.register_at_fork``): otherwise parent and child would hand out the
same ids.
"""

from __future__ import annotations

import os

_IDS_PER_READ = 256
_HEX_CHARS = 32

_ready: list[str] = []


def _refill() -> None:
    spelt = os.urandom(_IDS_PER_READ * _HEX_CHARS // 2).hex()
    _ready.extend([spelt[start:start + _HEX_CHARS] for start in range(0, len(spelt), _HEX_CHARS)])


def random_id() -> str:
    """A new random 128-bit id in hex (32 characters)."""
    while True:  # another thread may empty a refilled pool before this one pops
        try:
            return _ready.pop()
        except IndexError:
            _refill()


os.register_at_fork(after_in_child=_ready.clear)
