"""Bounded retries: the next step for every error class, backoff, Retry-After, streams and the budget."""

from __future__ import annotations

import random
import statistics
from typing import Any

import pytest

from routing.core.error_classifier import classify_exception, classify_http_error
from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.core.retry import Action, RetryBudget, RetryPolicy, client_status

POLICY = RetryPolicy()


def fail(error_class: ErrorClass, reason: str, *, retry_after_s: float | None = None, status: int | None = None
         ) -> AttemptOutcome:
    return AttemptOutcome.failure(error_class, reason, retry_after_s=retry_after_s, status=status)


def decide(outcome: AttemptOutcome, policy: RetryPolicy = POLICY, **overrides: Any) -> Action:
    arguments: dict[str, Any] = {
        "attempt_no": 1,
        "same_route_retries": 0,
        "fallbacks": 0,
        "stream_started": False,
        "remaining_s": 30.0,
        "fallback_available": True,
        "rng": random.Random(7),
        "launch_allowance_s": 1.0,
    }
    arguments.update(overrides)
    return policy.next_action(outcome, **arguments)


# (outcome after the primary attempt, expected action kind, expected reason)
FIRST_FAILURE = [
    (classify_exception("connect"), "retry_same", "connect_error"),
    (classify_exception("connect_timeout"), "retry_same", "connect_error"),
    (classify_exception("read_timeout_before_first_byte"), "fallback", "timeout"),
    (classify_exception("write_timeout"), "fallback", "timeout"),
    (classify_exception("read_timeout_mid_stream"), "give_up", "ambiguous"),
    (classify_exception("connection_lost_after_send"), "give_up", "ambiguous"),
    (classify_exception("protocol"), "fallback", "malformed"),
    (fail(ErrorClass.TRANSIENT, "rate_limited", retry_after_s=1.0), "fallback", "rate_limited"),
    (fail(ErrorClass.TRANSIENT, "server_error"), "fallback", "server_error"),
    (fail(ErrorClass.TRANSIENT, "overloaded"), "fallback", "overloaded"),
    (fail(ErrorClass.INCOMPATIBLE, "context_overflow"), "fallback", "context_overflow"),
    (fail(ErrorClass.INCOMPATIBLE, "auth"), "fallback", "auth"),
    (fail(ErrorClass.INVALID_RESPONSE, "schema"), "fallback", "schema"),
    (fail(ErrorClass.INVALID_RESPONSE, "truncated"), "fallback", "truncated"),
    (fail(ErrorClass.PERMANENT, "bad_request", status=400), "return_to_client", "bad_request"),
    (fail(ErrorClass.PERMANENT, "content_filter", status=400), "return_to_client", "content_filter"),
]


@pytest.mark.parametrize(("outcome", "kind", "reason"), FIRST_FAILURE, ids=lambda v: getattr(v, "reason", v))
def test_it_decides_the_next_step_by_error_class(outcome: AttemptOutcome, kind: str, reason: str) -> None:
    action = decide(outcome)
    assert (action.kind, action.reason) == (kind, reason)
    if kind != "retry_same":
        assert action.delay_s == 0.0


def test_it_never_retries_a_success() -> None:
    with pytest.raises(ValueError):
        decide(AttemptOutcome.success(0.1))


def test_it_makes_at_most_one_primary_one_retry_and_one_fallback_by_default() -> None:
    connect = classify_exception("connect")
    first = decide(connect, attempt_no=1)
    second = decide(connect, attempt_no=2, same_route_retries=1)
    third = decide(connect, attempt_no=3, same_route_retries=0, fallbacks=1)
    assert [first.kind, second.kind, third.kind] == ["retry_same", "fallback", "give_up"]
    assert third.reason == "max_attempts"


def test_it_stops_after_the_one_fallback() -> None:
    action = decide(fail(ErrorClass.TRANSIENT, "server_error"), attempt_no=2, fallbacks=1)
    assert (action.kind, action.reason) == ("give_up", "max_fallbacks")


def test_it_gives_up_when_no_target_meets_the_contract() -> None:
    action = decide(fail(ErrorClass.INCOMPATIBLE, "context_overflow"), fallback_available=False)
    assert (action.kind, action.reason) == ("give_up", "no_fallback")


def test_it_does_not_launch_a_fallback_that_cannot_finish_in_time() -> None:
    action = decide(fail(ErrorClass.TRANSIENT, "server_error"), remaining_s=0.8, launch_allowance_s=1.0)
    assert (action.kind, action.reason) == ("give_up", "deadline")


def test_it_replays_an_ambiguous_failure_only_when_the_workload_allows_it() -> None:
    lost = classify_exception("connection_lost_after_send")
    assert decide(lost).kind == "give_up"
    replaying = RetryPolicy(replay_ambiguous=True)
    action = decide(lost, replaying)
    # Even then never on the same target: the first one may still be generating.
    assert (action.kind, action.reason) == ("fallback", "connection_lost")


# ---- streams

@pytest.mark.parametrize("outcome", [o for o, _, _ in FIRST_FAILURE], ids=lambda o: o.reason)
def test_it_never_retries_or_falls_back_once_the_client_has_bytes(outcome: AttemptOutcome) -> None:
    action = decide(outcome, stream_started=True)
    assert (action.kind, action.reason) == ("give_up", "stream_started")


def test_it_may_still_fall_back_for_a_stream_cut_before_the_first_byte() -> None:
    before_first_byte = classify_exception("read_timeout_before_first_byte")
    assert decide(before_first_byte, stream_started=False).kind == "fallback"


# ---- backoff and Retry-After

def test_it_keeps_full_jitter_backoff_within_its_bounds() -> None:
    policy = RetryPolicy(backoff_base_s=0.2, backoff_cap_s=2.0)
    rng = random.Random(42)
    for retry_index, ceiling in [(0, 0.2), (1, 0.4), (2, 0.8), (3, 1.6), (4, 2.0), (10, 2.0), (500, 2.0)]:
        samples = [policy.backoff_s(retry_index, rng) for _ in range(4000)]
        assert min(samples) >= 0.0
        assert max(samples) <= ceiling
        # Uniform on [0, ceiling]: mean ceiling/2, sd ceiling/sqrt(12); with 4000 samples the mean's standard
        # error is ceiling * 0.0046, so 3% of the ceiling is more than six standard errors.
        assert statistics.fmean(samples) == pytest.approx(ceiling / 2, abs=0.03 * ceiling)
        assert max(samples) > 0.95 * ceiling  # it really spreads to the top


def test_it_waits_a_jittered_backoff_before_a_same_route_retry() -> None:
    action = decide(classify_exception("connect"), rng=random.Random(3))
    assert action.kind == "retry_same"
    assert 0.0 <= action.delay_s <= POLICY.backoff_base_s


def test_it_shortens_the_backoff_to_fit_the_deadline() -> None:
    policy = RetryPolicy(backoff_base_s=5.0, backoff_cap_s=5.0)
    action = decide(classify_exception("connect"), policy, remaining_s=1.3, launch_allowance_s=1.0,
                    rng=random.Random(1))
    assert action.kind == "retry_same"
    assert action.delay_s <= 0.3 + 1e-9


RATE_LIMITS_RETRIED = RetryPolicy(retry_same_reasons=frozenset({"connect_error", "rate_limited", "overloaded"}))


def test_it_honours_retry_after_when_it_fits() -> None:
    outcome = classify_http_error(429, {"retry-after": "2"}, None, "openai")
    action = decide(outcome, RATE_LIMITS_RETRIED, remaining_s=5.0, launch_allowance_s=1.0)
    assert (action.kind, action.delay_s, action.reason) == ("retry_same", 2.0, "rate_limited")


def test_it_lets_retry_after_win_over_the_backoff_cap() -> None:
    outcome = classify_http_error(529, {"retry-after": "7"}, None, "anthropic")
    action = decide(outcome, RATE_LIMITS_RETRIED, remaining_s=60.0)
    assert (action.kind, action.delay_s) == ("retry_same", 7.0)


def test_it_falls_back_instead_of_waiting_past_the_deadline() -> None:
    outcome = classify_http_error(429, {"retry-after": "20"}, None, "openai")
    action = decide(outcome, RATE_LIMITS_RETRIED, remaining_s=8.0)
    assert (action.kind, action.delay_s) == ("fallback", 0.0)


def test_it_gives_up_when_retry_after_does_not_fit_and_nothing_else_can_serve() -> None:
    outcome = classify_http_error(429, {"retry-after": "20"}, None, "openai")
    action = decide(outcome, RATE_LIMITS_RETRIED, remaining_s=8.0, fallback_available=False)
    assert (action.kind, action.reason) == ("give_up", "retry_after_exceeds_deadline")


def test_it_retries_a_429_on_the_same_route_only_when_configured() -> None:
    outcome = classify_http_error(429, {"retry-after": "1"}, None, "openai")
    assert decide(outcome).kind == "fallback"
    assert decide(outcome, RATE_LIMITS_RETRIED).kind == "retry_same"


@pytest.mark.parametrize(
    "arguments",
    [{"max_attempts_total": 0}, {"max_fallbacks": -1}, {"backoff_base_s": 3.0, "backoff_cap_s": 1.0},
     {"backoff_cap_s": float("inf")}],
)
def test_it_refuses_a_nonsensical_policy(arguments: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**arguments)


# ---- the budget

def test_it_allows_the_floor_of_retries_on_a_quiet_gateway() -> None:
    budget = RetryBudget(ratio=0.2, window_s=10.0, min_per_window=10)
    budget.record_request(0.0)
    assert [budget.try_spend(0.1) for _ in range(12)] == [True] * 10 + [False] * 2


def test_it_allows_twenty_percent_of_requests_over_the_window() -> None:
    budget = RetryBudget(ratio=0.2, window_s=10.0, min_per_window=10)
    for i in range(500):
        budget.record_request(i * 0.01)  # 500 requests within 5 s
    granted = sum(budget.try_spend(5.0) for _ in range(200))
    assert granted == 100
    snapshot = budget.snapshot(5.0)
    assert (snapshot.requests, snapshot.retries, snapshot.allowed) == (500, 100, 100.0)


def test_it_forgets_requests_and_retries_that_left_the_window() -> None:
    budget = RetryBudget(ratio=0.2, window_s=10.0, min_per_window=0, buckets=10)
    for _ in range(100):
        budget.record_request(0.5)
    assert sum(budget.try_spend(0.5) for _ in range(30)) == 20
    # 9.9 s later the first slice is still inside the window; at 10.0 s it has left.
    assert budget.snapshot(9.9).requests == 100
    assert budget.snapshot(10.0).requests == 0
    assert budget.snapshot(10.0).retries == 0
    assert budget.try_spend(10.0) is False  # no requests, no floor: nothing to spend


def test_it_survives_a_long_idle_gap_and_a_clock_that_steps_back() -> None:
    budget = RetryBudget(ratio=0.2, window_s=10.0, min_per_window=1)
    budget.record_request(0.0)
    budget.record_request(1_000_000.0)
    assert budget.snapshot(1_000_000.0).requests == 1
    budget.record_request(999_999.0)  # counted in the newest slice
    assert budget.snapshot(1_000_000.0).requests == 2


def test_it_does_not_spend_the_budget_on_a_step_it_refuses() -> None:
    budget = RetryBudget(ratio=0.0, min_per_window=1)
    budget.record_request(0.0)
    refused = decide(fail(ErrorClass.TRANSIENT, "server_error"), fallback_available=False, budget=budget)
    assert refused.reason == "no_fallback"
    assert budget.snapshot(0.0).retries == 0
    assert decide(fail(ErrorClass.TRANSIENT, "server_error"), budget=budget).kind == "fallback"
    assert decide(fail(ErrorClass.TRANSIENT, "server_error"), budget=budget).reason == "retry_budget"


@pytest.mark.parametrize("requests_per_second", [5, 50, 500])
def test_it_keeps_attempts_per_request_within_the_budget_when_every_target_fails(
    requests_per_second: int,
) -> None:
    """The retry storm: every attempt fails with a connect error, so every request wants all three attempts."""
    budget = RetryBudget(ratio=0.2, window_s=10.0, min_per_window=10)
    rng = random.Random(11)
    seconds = 60
    attempts = 0
    requests = requests_per_second * seconds
    for n in range(requests):
        now = n / requests_per_second
        budget.record_request(now)
        attempt_no, same_route, fallbacks = 1, 0, 0
        attempts += 1
        while True:
            action = POLICY.next_action(
                classify_exception("connect"), attempt_no=attempt_no, same_route_retries=same_route,
                fallbacks=fallbacks, stream_started=False, remaining_s=30.0, fallback_available=True,
                rng=rng, budget=budget, now=now,
            )
            if action.kind == "retry_same":
                same_route += 1
            elif action.kind == "fallback":
                fallbacks, same_route = fallbacks + 1, 0
            else:
                break
            attempt_no += 1
            attempts += 1
    windows = seconds / 10
    allowed_extra = max(0.2 * requests, 10 * windows)
    assert attempts - requests <= allowed_extra
    assert attempts / requests <= 1 + max(0.2, 10 * windows / requests) + 1e-9
    # ... and the budget is actually used, not just refused outright.
    assert attempts - requests >= 0.9 * min(allowed_extra, 2 * requests)


# ---- what the client gets

@pytest.mark.parametrize(
    ("outcome", "status"),
    [
        (fail(ErrorClass.PERMANENT, "bad_request", status=422), 422),
        (fail(ErrorClass.PERMANENT, "bad_request", status=None), 400),
        (fail(ErrorClass.PERMANENT, "bad_request", status=403), 400),  # never pass on an upstream auth status
        (fail(ErrorClass.INCOMPATIBLE, "context_overflow"), 400),
        (fail(ErrorClass.INCOMPATIBLE, "unsupported"), 400),
        (fail(ErrorClass.INCOMPATIBLE, "auth"), 502),
        (fail(ErrorClass.INCOMPATIBLE, "quota"), 502),
        (fail(ErrorClass.TRANSIENT, "rate_limited"), 503),
        (fail(ErrorClass.TRANSIENT, "overloaded"), 503),
        (fail(ErrorClass.TRANSIENT, "timeout"), 504),
        (fail(ErrorClass.TRANSIENT, "connect_error"), 502),
        (fail(ErrorClass.INVALID_RESPONSE, "schema"), 502),
        (fail(ErrorClass.AMBIGUOUS, "timeout"), 504),
        (fail(ErrorClass.AMBIGUOUS, "connection_lost"), 502),
    ],
)
def test_it_maps_the_last_failure_to_a_client_status(outcome: AttemptOutcome, status: int) -> None:
    assert client_status(outcome) == status


def test_it_answers_504_when_the_deadline_ran_out() -> None:
    assert client_status(fail(ErrorClass.TRANSIENT, "server_error"), deadline_exhausted=True) == 504
