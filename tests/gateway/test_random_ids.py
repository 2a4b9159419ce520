"""Request and attempt ids: 32 lower-case hex characters, as ``uuid4().hex`` spells them, and never repeated."""

from __future__ import annotations

import os
import re

from routing.gateway.random_ids import random_id
from routing.gateway.records import AttemptRecord


def test_an_id_is_32_hex_characters_and_ids_do_not_repeat() -> None:
    ids = [random_id() for _ in range(10_000)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", value) for value in ids)
    assert len(set(ids)) == len(ids)
    # All 128 bits vary: across 10,000 ids every hex digit takes more than one value at every position.
    assert all(len({value[i] for value in ids}) > 1 for i in range(32))


def test_every_attempt_record_gets_its_own_id() -> None:
    first, second = AttemptRecord(seq=1, target="m", provider="p"), AttemptRecord(seq=2, target="m", provider="p")
    assert re.fullmatch(r"[0-9a-f]{32}", first.attempt_id)
    assert first.attempt_id != second.attempt_id


def test_ids_span_several_reads_of_the_pool_without_repeating() -> None:
    ids = [random_id() for _ in range(5 * 256 + 7)]
    assert len(set(ids)) == len(ids)


def test_a_forked_child_never_hands_out_the_ids_its_parent_will() -> None:
    random_id()  # the pool now holds ids read before the fork
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's exit status carries the outcome
        try:
            os.close(reader)
            os.write(writer, "".join(random_id() for _ in range(100)).encode())
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        spelt = pipe.read().decode()
    os.waitpid(child, 0)
    child_ids = {spelt[i:i + 32] for i in range(0, len(spelt), 32)}
    parent_ids = {random_id() for _ in range(100)}
    assert len(child_ids) == 100
    assert not child_ids & parent_ids
