"""The tool-execution ledger: execution keys, the claim state machine, leases and TTL."""

from __future__ import annotations

import pytest

from routing.core.ledger import (
    ExecutionState,
    LedgerConflict,
    arguments_hash,
    attempt_id,
    canonical_json,
    execution_key,
    operation_id,
)
from tests.core.drivers import Ledger

OP = operation_id("order-42", key_id=7)


# ---- keys

def test_it_scopes_an_operation_by_the_gateway_key() -> None:
    assert operation_id("order-42", 7) == operation_id("order-42", "7")
    assert operation_id("order-42", 7) != operation_id("order-42", 8)
    assert operation_id("order-42", 7) != operation_id("order-43", 7)
    assert OP.startswith("op_")
    assert len(OP) == 35


def test_it_canonicalises_arguments_before_hashing() -> None:
    assert canonical_json({"b": [1, {"y": 2, "x": "é"}], "a": None}) == '{"a":null,"b":[1,{"x":"é","y":2}]}'
    same = [
        '{"amount": 10, "to": "acct_1"}',
        '{"to":"acct_1","amount":10}',
        '\n{ "to" : "acct_1",\n  "amount" : 10 }\n',
    ]
    assert len({execution_key(OP, "charge", a) for a in same}) == 1


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ('{"amount": 10}', '{"amount": 11}'),
        ('{"amount": 10}', '{"amount": 10.0}'),  # no numeric normalisation: the model wrote different things
        ('{"to": "é"}', '{"to": "e"}'),
        ('{"a": [1, 2]}', '{"a": [2, 1]}'),
    ],
)
def test_it_keeps_different_arguments_apart(left: str, right: str) -> None:
    assert arguments_hash(left) != arguments_hash(right)


def test_it_builds_the_execution_key_from_operation_tool_and_hash() -> None:
    key = execution_key(OP, "ns:charge", '{"amount": 10}')
    prefix, _, digest = key.rpartition(":")
    assert prefix == f"{OP}:ns:charge"  # a colon in a tool name stays readable: the hash is fixed-length
    assert len(digest) == 64
    assert key != execution_key(OP, "refund", '{"amount": 10}')
    assert key != execution_key(operation_id("order-43", 7), "ns:charge", '{"amount": 10}')


@pytest.mark.parametrize("bad", ["", "{amount: 10}", '{"a": NaN}', '{"a": Infinity}'])
def test_it_refuses_arguments_that_are_not_json(bad: str) -> None:
    with pytest.raises(ValueError):
        execution_key(OP, "charge", bad)


def test_it_numbers_attempts() -> None:
    assert attempt_id("req_1", 2) == "req_1.2"


# ---- the claim state machine

KEY = execution_key(OP, "charge", '{"amount": 10}')


def ledger(ttl_s: float = 3600.0) -> Ledger:
    return Ledger(ttl_s=ttl_s)


def test_it_lets_exactly_one_executor_run_a_side_effect() -> None:
    book = ledger()
    first = book.claim(KEY, owner="worker-a", now=0.0, lease_s=30.0)
    second = book.claim(KEY, owner="worker-b", now=1.0, lease_s=30.0)
    assert (first.kind, second.kind) == ("claimed", "conflict")
    assert second.entry.owner == "worker-a"
    done = book.settle(KEY, owner="worker-a", state="completed", result='{"charge_id": "ch_1"}', now=2.0)
    assert done.state is ExecutionState.COMPLETED
    # Every later claim, by anyone, gets the stored result instead of charging again.
    again = book.claim(KEY, owner="worker-b", now=3.0, lease_s=30.0)
    assert (again.kind, again.entry.result) == ("completed", '{"charge_id": "ch_1"}')
    assert book.get(KEY, now=3.0) == done


def test_it_lets_a_retryable_failure_be_claimed_again() -> None:
    book = ledger()
    book.claim(KEY, owner="a", now=0.0, lease_s=30.0)
    failed = book.settle(KEY, owner="a", state="pending", error="503 from the payment API", now=1.0)
    assert failed.state is ExecutionState.PENDING
    retry = book.claim(KEY, owner="b", now=2.0, lease_s=30.0)
    assert (retry.kind, retry.entry.attempts, retry.entry.error) == ("claimed", 2, "503 from the payment API")


def test_it_refuses_to_rerun_a_permanent_failure() -> None:
    book = ledger()
    book.claim(KEY, owner="a", now=0.0, lease_s=30.0)
    book.settle(KEY, owner="a", state="failed", error="card declined", now=1.0)
    refused = book.claim(KEY, owner="b", now=2.0, lease_s=30.0)
    assert (refused.kind, refused.entry.error) == ("failed", "card declined")


def test_it_records_a_lapsed_lease_as_unknown_never_as_not_done() -> None:
    book = ledger()
    book.claim(KEY, owner="a", now=0.0, lease_s=30.0)
    assert book.get(KEY, now=29.9).state_at(29.9) is ExecutionState.CLAIMED  # type: ignore[union-attr]
    later = book.claim(KEY, owner="b", now=30.0, lease_s=30.0)
    assert later.kind == "unknown"
    assert later.entry.state_at(30.0) is ExecutionState.UNKNOWN


def test_it_takes_over_an_unknown_execution_only_when_asked() -> None:
    book = ledger()
    book.claim(KEY, owner="a", now=0.0, lease_s=30.0)
    book.settle(KEY, owner="a", state="unknown", error="timeout talking to the bank", now=5.0)
    assert book.claim(KEY, owner="b", now=6.0, lease_s=30.0).kind == "unknown"
    taken = book.claim(KEY, owner="b", now=7.0, lease_s=30.0, takeover_unknown=True)
    assert (taken.kind, taken.entry.owner, taken.entry.attempts) == ("claimed", "b", 2)
    # The first executor lost the claim: its late report is refused.
    with pytest.raises(LedgerConflict):
        book.settle(KEY, owner="a", state="completed", result="{}", now=8.0)


def test_it_accepts_a_late_report_from_the_owner_when_nobody_took_over() -> None:
    book = ledger()
    book.claim(KEY, owner="a", now=0.0, lease_s=30.0)
    done = book.settle(KEY, owner="a", state="completed", result='{"ok": true}', now=45.0)  # after the lease
    assert done.state is ExecutionState.COMPLETED
    assert book.claim(KEY, owner="b", now=46.0, lease_s=30.0).kind == "completed"


def test_it_refuses_reports_from_someone_who_never_claimed() -> None:
    book = ledger()
    with pytest.raises(LedgerConflict):
        book.settle(KEY, owner="a", state="completed", result="{}", now=0.0)
    book.claim(KEY, owner="a", now=0.0, lease_s=30.0)
    with pytest.raises(LedgerConflict):
        book.settle(KEY, owner="intruder", state="pending", error="x", now=1.0)


def test_it_treats_a_repeated_completion_as_harmless_and_a_different_one_as_a_conflict() -> None:
    book = ledger()
    book.claim(KEY, owner="a", now=0.0, lease_s=30.0)
    first = book.settle(KEY, owner="a", state="completed", result='{"id": 1}', now=1.0)
    assert book.settle(KEY, owner="a", state="completed", result='{"id": 1}', now=2.0) == first
    with pytest.raises(LedgerConflict):
        book.settle(KEY, owner="a", state="completed", result='{"id": 2}', now=3.0)
    with pytest.raises(LedgerConflict):
        book.settle(KEY, owner="a", state="failed", error="x", now=3.0)


def test_it_forgets_an_execution_after_its_ttl() -> None:
    book = ledger(ttl_s=100.0)
    book.claim(KEY, owner="a", now=0.0, lease_s=30.0)
    book.settle(KEY, owner="a", state="completed", result="{}", now=10.0)
    assert book.claim(KEY, owner="b", now=109.9, lease_s=30.0).kind == "completed"
    assert book.get(KEY, now=110.0) is None
    assert book.claim(KEY, owner="b", now=110.0, lease_s=30.0).kind == "claimed"


def test_it_keeps_a_claim_at_least_as_long_as_its_lease() -> None:
    book = ledger(ttl_s=10.0)
    book.claim(KEY, owner="a", now=0.0, lease_s=60.0)
    assert book.claim(KEY, owner="b", now=30.0, lease_s=60.0).kind == "conflict"
