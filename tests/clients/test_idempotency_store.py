"""The Idempotency-Key store against PostgreSQL: every path of ``begin`` and ``finish``, and concurrent firsts.

The store runs each call in a worker thread with its own connection, so the tests use a transactional test
database (rows are committed and visible across threads, as between gateway workers).
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from routing.clients.idempotency_store import StoreUnavailable, begin, finish
from routing.core.idempotency import BeginDecision
from routing.models import IdempotentOperation
from tests import unreachable_database

pytestmark = pytest.mark.django_db(transaction=True)

database_unreachable = unreachable_database.database_unreachable

LEASE_S = 60.0


def start(operation: str, *, fingerprint: str = "fp-1", owner: str = "req-1") -> BeginDecision:
    return asyncio.run(begin(operation, fingerprint=fingerprint, owner=owner, lease_s=LEASE_S))


def end(operation: str, *, owner: str = "req-1", outcome: str, answer: bytes | None = None) -> None:
    asyncio.run(finish(operation, owner=owner, outcome=outcome, answer=answer))


@pytest.fixture
def operation() -> str:
    return f"op_{uuid.uuid4().hex}"


def test_the_first_request_proceeds_and_holds_the_operation(operation: str) -> None:
    assert start(operation).kind == "proceed"
    row = IdempotentOperation.objects.get(operation_id=operation)
    assert (row.state, row.owner, row.fingerprint) == ("in_flight", "req-1", "fp-1")
    assert row.lease_until > time.time() + LEASE_S - 10


def test_a_repeat_while_the_first_runs_is_in_flight(operation: str) -> None:
    start(operation)
    repeat = start(operation, owner="req-2")
    assert repeat.kind == "in_flight"
    assert IdempotentOperation.objects.get(operation_id=operation).owner == "req-1"  # unchanged


def test_a_repeat_after_completion_replays_the_stored_answer(operation: str) -> None:
    start(operation)
    end(operation, outcome="completed", answer=b'{"body": "the answer"}')
    replay = start(operation, owner="req-2")
    assert replay.kind == "replay"
    assert replay.entry is not None
    assert replay.entry.answer == b'{"body": "the answer"}'


def test_the_same_key_for_another_request_is_a_mismatch(operation: str) -> None:
    start(operation)
    assert start(operation, fingerprint="fp-other", owner="req-2").kind == "mismatch"
    end(operation, outcome="completed", answer=b"{}")
    assert start(operation, fingerprint="fp-other", owner="req-3").kind == "mismatch"


def test_an_unknown_outcome_is_never_run_again_under_the_same_key(operation: str) -> None:
    start(operation)
    end(operation, outcome="unknown")
    assert start(operation, owner="req-2").kind == "unknown"
    assert IdempotentOperation.objects.get(operation_id=operation).state == "unknown"


def test_a_definite_failure_is_forgotten_so_the_key_may_be_used_again(operation: str) -> None:
    start(operation)
    end(operation, outcome="failed")
    assert not IdempotentOperation.objects.filter(operation_id=operation).exists()
    assert start(operation, owner="req-2").kind == "proceed"


def test_a_lapsed_lease_reads_as_unknown_but_its_owner_may_still_complete(operation: str) -> None:
    start(operation)
    IdempotentOperation.objects.filter(operation_id=operation).update(lease_until=time.time() - 1)
    assert start(operation, owner="req-2").kind == "unknown"
    end(operation, outcome="completed", answer=b"late but true")  # the owner was only slow
    assert start(operation, owner="req-3").kind == "replay"


def test_an_expired_operation_is_forgotten(operation: str) -> None:
    start(operation)
    end(operation, outcome="completed", answer=b"old")
    IdempotentOperation.objects.filter(operation_id=operation).update(expires_at=time.time() - 1)
    assert start(operation, fingerprint="fp-new", owner="req-2").kind == "proceed"
    assert IdempotentOperation.objects.get(operation_id=operation).fingerprint == "fp-new"


def test_only_the_owner_finishes_an_operation(operation: str) -> None:
    start(operation)
    end(operation, owner="someone-else", outcome="completed", answer=b"not mine")
    row = IdempotentOperation.objects.get(operation_id=operation)
    assert (row.state, row.answer) == ("in_flight", None)


def test_concurrent_first_requests_let_exactly_one_proceed(operation: str) -> None:
    async def race() -> list[str]:
        decisions = await asyncio.gather(*(
            begin(operation, fingerprint="fp-1", owner=f"req-{i}", lease_s=LEASE_S) for i in range(8)))
        return [d.kind for d in decisions]

    kinds = asyncio.run(race())
    assert sorted(kinds) == ["in_flight"] * 7 + ["proceed"]
    assert IdempotentOperation.objects.filter(operation_id=operation).count() == 1


def test_an_unreachable_database_is_reported_as_store_unavailable(operation: str, database_unreachable: None) -> None:
    with pytest.raises(StoreUnavailable):
        start(operation)
