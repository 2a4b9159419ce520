"""Random ids for requests and attempts: 32 lower-case hex characters, as ``uuid.uuid4().hex`` spells them.

``uuid4().hex`` reads the same 16 bytes from ``os.urandom`` and then builds a ``UUID`` (an integer from the bytes,
the version bits set, the hex string formatted back from the integer) in four Python calls; every request takes
two. Nothing reads an id's version bits, so the bytes are spelt in hex directly: the same 128 bits from the
same source, six of them no longer fixed.
"""

from __future__ import annotations

import os


def random_id() -> str:
    """A new random 128-bit id in hex (32 characters)."""
    return os.urandom(16).hex()
