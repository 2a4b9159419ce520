"""A 401/403/404 one gateway key saw: avoided by that key alone until a probe or a second key confirms it."""

from __future__ import annotations

import pytest

from routing.core.health import TargetHealth
from routing.core.lockouts import LockoutSuspicions, needs_confirmation
from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.core.probes import apply_confirmation


def not_found() -> AttemptOutcome:
    return AttemptOutcome.failure(ErrorClass.INCOMPATIBLE, "not_found", status=404, latency_s=0.05)


@pytest.mark.parametrize(("outcome", "expected"), [
    (not_found(), True),
    (AttemptOutcome.failure(ErrorClass.INCOMPATIBLE, "auth", status=401), True),
    (AttemptOutcome.failure(ErrorClass.INCOMPATIBLE, "quota", status=402), True),
    (AttemptOutcome.failure(ErrorClass.INCOMPATIBLE, "key_unavailable"), False),  # nothing was sent
    (AttemptOutcome.failure(ErrorClass.INCOMPATIBLE, "tls_error"), False),
    (AttemptOutcome.failure(ErrorClass.TRANSIENT, "server_error", status=500), False),
    (not_found().by_client(), False),
])
def test_it_asks_for_confirmation_only_of_a_lockout_the_provider_answered(outcome: AttemptOutcome,
                                                                          expected: bool) -> None:
    assert needs_confirmation(outcome) is expected


def test_only_the_key_that_saw_it_avoids_the_target_until_it_expires() -> None:
    suspicions = LockoutSuspicions(ttl_s=300.0)
    assert suspicions.report("m", 1, 10.0) == "suspected"
    assert suspicions.avoids("m", 1, 10.0) == 310.0
    assert suspicions.avoids("m", 2, 10.0) is None
    assert suspicions.avoids("other", 1, 10.0) is None
    assert suspicions.avoids("m", 1, 310.0) is None
    assert len(suspicions) == 0


def test_a_second_key_seeing_the_same_confirms_it() -> None:
    suspicions = LockoutSuspicions()
    assert suspicions.report("m", 1, 0.0) == "suspected"
    assert suspicions.report("m", 1, 1.0) == "suspected"  # the same key again proves nothing new
    assert suspicions.report("m", 2, 2.0) == "confirmed"
    assert (suspicions.avoids("m", 1, 2.0), len(suspicions)) == (None, 0)  # the breaker holds it from here


def test_a_second_key_after_the_first_suspicion_expired_is_a_new_suspicion() -> None:
    suspicions = LockoutSuspicions(ttl_s=5.0)
    suspicions.report("m", 1, 0.0)
    assert suspicions.report("m", 2, 6.0) == "suspected"


def test_a_passing_probe_dismisses_it_and_the_next_sightings_for_a_while() -> None:
    suspicions = LockoutSuspicions(probe_spacing_s=10.0)
    suspicions.report("m", 1, 0.0)
    suspicions.dismiss("m", 1.0)
    assert suspicions.avoids("m", 1, 1.0) is None
    assert suspicions.report("m", 2, 5.0) == "dismissed"
    assert suspicions.report("m", 2, 11.0) == "suspected"


def test_it_books_one_confirmation_probe_per_target_and_spacing() -> None:
    suspicions = LockoutSuspicions(probe_spacing_s=10.0)
    assert suspicions.wants_probe("m", 0.0)
    assert not suspicions.wants_probe("m", 9.0)
    assert suspicions.wants_probe("other", 9.0)
    assert suspicions.wants_probe("m", 10.0)


def test_it_is_bounded_and_forgets_the_least_recent_first() -> None:
    suspicions = LockoutSuspicions(max_entries=3)
    for n in range(5):
        suspicions.report(f"m{n}", 1, float(n))
    assert len(suspicions) == 3
    assert [suspicions.avoids(f"m{n}", 1, 5.0) is not None for n in range(5)] == [False, False, True, True, True]


def test_it_forgets_targets_no_longer_configured() -> None:
    suspicions = LockoutSuspicions()
    suspicions.report("gone", 1, 0.0)
    suspicions.report("kept", 1, 0.0)
    suspicions.retain(["kept"])
    assert (suspicions.avoids("gone", 1, 1.0), suspicions.avoids("kept", 1, 1.0) is not None) == (None, True)


def test_a_confirming_probe_locks_the_target_out_for_every_key() -> None:
    health, suspicions = TargetHealth("m"), LockoutSuspicions()
    suspicions.report("m", 1, 0.0)
    assert apply_confirmation(health, suspicions, not_found(), 1.0) == "confirmed"
    assert health.status(1.0) == "cooling"
    assert health.cooldown_until == 1.0 + health.config.cooldown_max_s
    assert health.latency_estimate_s is None  # a probe is not the kind of call the estimate is about
    assert suspicions.avoids("m", 1, 1.0) is None


def test_a_passing_probe_leaves_the_target_healthy_for_every_key() -> None:
    health, suspicions = TargetHealth("m"), LockoutSuspicions()
    suspicions.report("m", 1, 0.0)
    assert apply_confirmation(health, suspicions, AttemptOutcome.success(0.05), 1.0) == "dismissed"
    assert (health.status(1.0), suspicions.avoids("m", 1, 1.0)) == ("healthy", None)


def test_a_probe_that_proves_nothing_leaves_the_suspicion_to_its_key() -> None:
    health, suspicions = TargetHealth("m"), LockoutSuspicions()
    suspicions.report("m", 1, 0.0)
    failed = AttemptOutcome.failure(ErrorClass.TRANSIENT, "server_error", status=500)
    assert apply_confirmation(health, suspicions, failed, 1.0) == "unchanged"
    assert health.status(1.0) == "healthy"
    assert suspicions.avoids("m", 1, 1.0) is not None
