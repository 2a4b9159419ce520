"""Idempotent operations: replay of a stored answer, in-flight conflicts, mismatches, unknowns and TTL."""

from __future__ import annotations

import pytest

from routing.core.idempotency import OperationState
from routing.core.ledger import LedgerConflict, operation_id, request_fingerprint
from tests.core.drivers import Operations

OP = operation_id("retry-me", key_id=1)
BODY = request_fingerprint('{"messages":[{"content":"hi","role":"user"}],"model":"normal"}')
OTHER_BODY = request_fingerprint('{"messages":[{"content":"bye","role":"user"}],"model":"normal"}')


def table(ttl_s: float = 3600.0) -> Operations:
    return Operations(ttl_s=ttl_s)


def test_it_returns_the_stored_answer_to_a_repeat() -> None:
    ops = table()
    assert ops.begin(OP, fingerprint=BODY, owner="req_1", now=0.0, lease_s=60.0).kind == "proceed"
    ops.finish(OP, outcome="completed", owner="req_1", answer=b'{"id":"chatcmpl-1"}', now=3.0)
    repeat = ops.begin(OP, fingerprint=BODY, owner="req_2", now=10.0, lease_s=60.0)
    assert repeat.kind == "replay"
    assert repeat.entry is not None
    assert repeat.entry.answer == b'{"id":"chatcmpl-1"}'


def test_it_answers_conflict_while_the_first_request_is_in_flight() -> None:
    ops = table()
    ops.begin(OP, fingerprint=BODY, owner="req_1", now=0.0, lease_s=60.0)
    assert ops.begin(OP, fingerprint=BODY, owner="req_2", now=1.0, lease_s=60.0).kind == "in_flight"


def test_it_refuses_the_same_key_for_a_different_request() -> None:
    ops = table()
    ops.begin(OP, fingerprint=BODY, owner="req_1", now=0.0, lease_s=60.0)
    ops.finish(OP, outcome="completed", owner="req_1", answer=b"{}", now=1.0)
    assert ops.begin(OP, fingerprint=OTHER_BODY, owner="req_2", now=2.0, lease_s=60.0).kind == "mismatch"


def test_it_forgets_a_definite_failure_so_the_client_can_retry_with_the_same_key() -> None:
    ops = table()
    ops.begin(OP, fingerprint=BODY, owner="req_1", now=0.0, lease_s=60.0)
    ops.finish(OP, outcome="failed", owner="req_1", now=1.0)
    assert ops.get(OP, now=1.0) is None
    assert ops.begin(OP, fingerprint=BODY, owner="req_2", now=2.0, lease_s=60.0).kind == "proceed"


def test_it_remembers_an_ambiguous_outcome_as_unknown() -> None:
    ops = table()
    ops.begin(OP, fingerprint=BODY, owner="req_1", now=0.0, lease_s=60.0)
    entry = ops.finish(OP, outcome="unknown", owner="req_1", now=5.0)
    assert entry.state is OperationState.UNKNOWN
    repeat = ops.begin(OP, fingerprint=BODY, owner="req_2", now=6.0, lease_s=60.0)
    assert repeat.kind == "unknown"


def test_it_treats_a_lapsed_lease_as_unknown_not_as_nothing_happened() -> None:
    ops = table()
    ops.begin(OP, fingerprint=BODY, owner="req_1", now=0.0, lease_s=60.0)
    assert ops.begin(OP, fingerprint=BODY, owner="req_2", now=59.0, lease_s=60.0).kind == "in_flight"
    assert ops.begin(OP, fingerprint=BODY, owner="req_2", now=60.0, lease_s=60.0).kind == "unknown"
    # The repeat does not become the owner; the first request, if it was only slow, may still store its
    # answer: a late truth beats "unknown".
    with pytest.raises(LedgerConflict):
        ops.finish(OP, outcome="completed", owner="req_2", answer=b"{}", now=61.0)
    ops.finish(OP, outcome="completed", owner="req_1", answer=b"late", now=62.0)
    assert ops.begin(OP, fingerprint=BODY, owner="req_3", now=63.0, lease_s=60.0).kind == "replay"


def test_it_only_lets_the_owner_finish_an_operation() -> None:
    ops = table()
    ops.begin(OP, fingerprint=BODY, owner="req_1", now=0.0, lease_s=60.0)
    with pytest.raises(LedgerConflict):
        ops.finish(OP, outcome="completed", owner="req_2", answer=b"{}", now=1.0)
    ops.finish(OP, outcome="completed", owner="req_1", answer=b"{}", now=2.0)
    with pytest.raises(LedgerConflict):
        ops.finish(OP, outcome="completed", owner="req_1", answer=b"{}", now=3.0)  # already completed


def test_it_forgets_a_completed_answer_after_the_ttl() -> None:
    ops = table(ttl_s=100.0)
    ops.begin(OP, fingerprint=BODY, owner="req_1", now=0.0, lease_s=10.0)
    ops.finish(OP, outcome="completed", owner="req_1", answer=b"{}", now=5.0)
    assert ops.begin(OP, fingerprint=BODY, owner="req_2", now=104.9, lease_s=10.0).kind == "replay"
    assert ops.begin(OP, fingerprint=BODY, owner="req_3", now=105.0, lease_s=10.0).kind == "proceed"
