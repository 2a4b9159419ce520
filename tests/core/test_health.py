"""Target health: the peak-EWMA latency estimate, the cooldown rules and the breaker they form (one state machine).

Time is injected (plain floats); every expected number is exact arithmetic, so tolerances are 1e-9 unless a
test says otherwise.
"""

from __future__ import annotations

import math

import pytest

from routing.core.health import (
    CooldownStarted,
    HealthConfig,
    HealthRegistry,
    TargetHealth,
    TargetStateView,
    failure_kind,
)
from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.core.table import SettingsInForce

EXACT = 1e-9


def ok(latency_s: float = 0.5) -> AttemptOutcome:
    return AttemptOutcome.success(latency_s)


def fail(
    reason: str,
    error_class: ErrorClass = ErrorClass.TRANSIENT,
    *,
    status: int | None = None,
    latency_s: float = 0.05,
    retry_after_s: float | None = None,
) -> AttemptOutcome:
    return AttemptOutcome.failure(error_class, reason, status=status, latency_s=latency_s, retry_after_s=retry_after_s)


RATE_LIMITED = fail("rate_limited", status=429)
SERVER_ERROR = fail("server_error", status=500)


def cooldown_of(health: TargetHealth, now: float) -> float:
    assert health.cooldown_until is not None, "expected the target to be cooling"
    return health.cooldown_until - now


# -- latency: peak EWMA --------------------------------------------------------------------------------------


def test_it_takes_the_first_sample_as_the_estimate() -> None:
    health = TargetHealth("a")
    assert health.latency_estimate_s is None
    health.record(ok(0.8), now=0.0)
    assert health.latency_estimate_s == pytest.approx(0.8, abs=EXACT)


def test_it_reacts_at_once_to_a_slow_response() -> None:
    health = TargetHealth("a")
    for second in range(10):
        health.record(ok(0.5), now=float(second))
    health.record(ok(6.0), now=10.0)
    assert health.latency_estimate_s == pytest.approx(6.0, abs=EXACT)


def test_it_decays_exponentially_with_time_after_a_peak() -> None:
    config = HealthConfig(latency_decay_s=10.0)
    health = TargetHealth("a", config)
    health.record(ok(5.0), now=0.0)
    health.record(ok(0.5), now=10.0)  # one time constant later: the peak keeps exp(-1) of its weight
    expected = 5.0 * math.exp(-1.0) + 0.5 * (1.0 - math.exp(-1.0))
    assert health.latency_estimate_s == pytest.approx(expected, abs=EXACT)
    for second in range(11, 71):  # a minute of fast answers, one a second
        health.record(ok(0.5), now=float(second))
    assert health.latency_estimate_s is not None
    assert health.latency_estimate_s == pytest.approx(0.5, abs=0.01)  # exp(-6) of the excess is left


def test_it_does_not_let_a_burst_of_fast_answers_at_one_instant_erase_a_peak() -> None:
    health = TargetHealth("a")
    health.record(ok(4.0), now=100.0)
    for _ in range(50):
        health.record(ok(0.1), now=100.0)
    assert health.latency_estimate_s == pytest.approx(4.0, abs=EXACT)


def test_it_replaces_a_stale_estimate_with_the_first_fresh_sample() -> None:
    health = TargetHealth("a", HealthConfig(latency_decay_s=10.0))
    health.record(ok(8.0), now=0.0)
    health.record(ok(0.4), now=600.0)  # ten minutes of silence: the old peak keeps exp(-60) of its weight
    assert health.latency_estimate_s == pytest.approx(0.4, abs=1e-6)


def test_it_does_not_let_a_target_that_fails_fast_look_fast() -> None:
    health = TargetHealth("a")
    health.record(ok(0.6), now=0.0)
    health.record(fail("server_error", status=500, latency_s=0.01), now=1.0)
    assert health.latency_estimate_s == pytest.approx(1.2, abs=EXACT)  # twice the estimate, not 10 ms
    health.record(fail("connect_error", latency_s=0.002), now=2.0)
    assert health.latency_estimate_s == pytest.approx(2.4, abs=EXACT)


def test_it_counts_a_fast_failure_of_an_unmeasured_target_as_the_floor() -> None:
    health = TargetHealth("a", HealthConfig(failure_latency_floor_s=1.0))
    health.record(fail("connect_error", latency_s=0.003), now=0.0)
    assert health.latency_estimate_s == pytest.approx(1.0, abs=EXACT)


def test_it_keeps_a_slow_failure_at_its_observed_time() -> None:
    health = TargetHealth("a")
    health.record(ok(0.5), now=0.0)
    health.record(fail("timeout", latency_s=30.0), now=31.0)
    assert health.latency_estimate_s == pytest.approx(30.0, abs=EXACT)


def test_it_caps_the_failure_penalty() -> None:
    health = TargetHealth("a", HealthConfig(failure_latency_cap_s=10.0, failures_before_cooldown=100))
    health.record(ok(4.0), now=0.0)
    for second in range(1, 10):
        health.record(fail("server_error", status=502, latency_s=0.1), now=float(second))
    assert health.latency_estimate_s == pytest.approx(10.0, abs=EXACT)


# -- cooldown rules ------------------------------------------------------------------------------------------


def test_it_cools_a_rate_limited_target_for_the_base_at_once() -> None:
    health = TargetHealth("a")
    started = health.record(RATE_LIMITED, now=100.0)
    assert started == CooldownStarted("a", "rate_limited", "rate_limited", 30.0, 130.0, 1)
    assert health.status(100.0) == "cooling"
    assert not health.available(129.9)


def test_it_doubles_the_cooldown_on_each_consecutive_429_up_to_the_maximum() -> None:
    health = TargetHealth("a")
    now = 0.0
    durations = []
    for _ in range(7):
        health.record(RATE_LIMITED, now)
        durations.append(cooldown_of(health, now))
        now = health.cooldown_until or now  # the probe after the cooldown gets another 429
        assert health.status(now) == "probing"
    assert durations == [30.0, 60.0, 120.0, 240.0, 300.0, 300.0, 300.0]


def test_it_resets_the_doubling_after_a_success() -> None:
    health = TargetHealth("a")
    health.record(RATE_LIMITED, now=0.0)
    health.record(RATE_LIMITED, now=30.0)  # failed probe: 60 s
    assert cooldown_of(health, 30.0) == 60.0
    health.record(ok(), now=90.0)  # the next probe succeeds: closed
    assert health.status(90.0) == "healthy"
    health.record(RATE_LIMITED, now=200.0)
    assert cooldown_of(health, 200.0) == 30.0


@pytest.mark.parametrize(
    ("retry_after_s", "expected_s"),
    [
        (None, 30.0),  # no header: the base
        (10.0, 30.0),  # shorter than the cooldown: the cooldown wins
        (100.0, 100.0),  # longer: honoured
        (1000.0, 300.0),  # longer than the maximum: the maximum caps every cooldown
    ],
)
def test_it_honours_a_longer_retry_after(retry_after_s: float | None, expected_s: float) -> None:
    health = TargetHealth("a")
    health.record(fail("rate_limited", status=429, retry_after_s=retry_after_s), now=0.0)
    assert cooldown_of(health, 0.0) == expected_s


@pytest.mark.parametrize(
    ("status", "reason"),
    [(401, "auth"), (403, "auth"), (404, "not_found"), (402, "quota"), (None, "auth"), (404, "server_error")],
)
def test_it_cools_a_locked_out_target_for_the_maximum_at_once(status: int | None, reason: str) -> None:
    health = TargetHealth("a")
    error_class = ErrorClass.TRANSIENT if reason == "server_error" else ErrorClass.INCOMPATIBLE
    started = health.record(fail(reason, error_class, status=status), now=0.0)
    assert started is not None
    assert started.trigger == "lockout"
    assert cooldown_of(health, 0.0) == 300.0


@pytest.mark.parametrize(
    ("error_class", "reason", "status"),
    [
        (ErrorClass.TRANSIENT, "server_error", 500),
        (ErrorClass.TRANSIENT, "overloaded", 529),
        (ErrorClass.TRANSIENT, "timeout", 504),
        (ErrorClass.TRANSIENT, "connect_error", None),
        (ErrorClass.AMBIGUOUS, "timeout", None),
        (ErrorClass.AMBIGUOUS, "stream_cut", None),
        (ErrorClass.AMBIGUOUS, "connection_lost", None),
    ],
)
def test_it_cools_after_three_transient_failures_in_a_row(
    error_class: ErrorClass, reason: str, status: int | None
) -> None:
    health = TargetHealth("a")
    outcome = fail(reason, error_class, status=status)
    assert health.record(outcome, now=0.0) is None
    assert health.record(outcome, now=1.0) is None
    assert health.status(1.0) == "healthy"
    started = health.record(outcome, now=2.0)
    assert started is not None
    assert started.trigger == "failures"
    assert cooldown_of(health, 2.0) == 30.0


def test_it_counts_only_failures_in_a_row() -> None:
    health = TargetHealth("a")
    for now in (0.0, 1.0):
        health.record(SERVER_ERROR, now)
    health.record(ok(), now=2.0)
    for now in (3.0, 4.0):
        health.record(SERVER_ERROR, now)
    assert health.status(4.0) == "healthy"
    assert health.consecutive_failures == 2


@pytest.mark.parametrize(
    ("error_class", "reason", "status"),
    [
        (ErrorClass.PERMANENT, "bad_request", 400),
        (ErrorClass.PERMANENT, "content_filter", 400),
        (ErrorClass.PERMANENT, "auth", 401),  # the caller's own gateway key, not the target's
        (ErrorClass.INCOMPATIBLE, "context_overflow", 400),
        (ErrorClass.INCOMPATIBLE, "context_overflow", 429),  # "request too large for" the rate limit
        (ErrorClass.INCOMPATIBLE, "unsupported", 400),
    ],
)
def test_it_never_cools_a_target_for_the_requests_own_fault(error_class: ErrorClass, reason: str, status: int) -> None:
    health = TargetHealth("a")
    health.record(ok(0.5), now=0.0)
    for second in range(1, 101):
        assert health.record(fail(reason, error_class, status=status), now=float(second)) is None
    assert health.status(100.0) == "healthy"
    assert health.latency_estimate_s == pytest.approx(0.5, abs=EXACT)  # a fast 400 says nothing about speed
    assert health.consecutive_failures == 0
    assert health.last_error_reason is None


def test_it_cools_after_five_invalid_responses_in_a_row() -> None:
    health = TargetHealth("a")
    outcome = fail("schema", ErrorClass.INVALID_RESPONSE, status=200, latency_s=2.0)
    for second in range(4):
        assert health.record(outcome, now=float(second)) is None
    started = health.record(outcome, now=4.0)
    assert started is not None
    assert started.trigger == "invalid_responses"
    assert cooldown_of(health, 4.0) == 30.0


@pytest.mark.parametrize(
    ("outcome", "kind"),
    [
        (RATE_LIMITED, "rate_limited"),
        (fail("server_error", status=429), "rate_limited"),  # the status alone is enough
        (fail("auth", ErrorClass.INCOMPATIBLE, status=401), "lockout"),
        (fail("quota", ErrorClass.INCOMPATIBLE, status=402), "lockout"),
        (SERVER_ERROR, "transient"),
        (fail("stream_cut", ErrorClass.AMBIGUOUS), "transient"),
        (fail("malformed", ErrorClass.INVALID_RESPONSE), "invalid"),
        (fail("context_overflow", ErrorClass.INCOMPATIBLE, status=429), None),
        (fail("bad_request", ErrorClass.PERMANENT, status=400), None),
        (ok(), None),
    ],
)
def test_it_sorts_each_outcome_into_one_failure_kind(outcome: AttemptOutcome, kind: str | None) -> None:
    assert failure_kind(outcome) == kind


# -- the breaker: cooling, probing, closing ------------------------------------------------------------------


def test_it_refuses_attempts_while_cooling_and_admits_a_probe_after() -> None:
    health = TargetHealth("a")
    health.record(RATE_LIMITED, now=0.0)
    assert health.begin(10.0) == "refused"
    assert health.in_flight == 0
    assert health.status(30.0) == "probing"
    assert health.begin(30.0) == "probe"
    assert health.in_flight == 1


def test_it_bounds_the_half_open_probes() -> None:
    health = TargetHealth("a", HealthConfig(half_open_probes=2))
    health.record(RATE_LIMITED, now=0.0)
    assert [health.begin(31.0) for _ in range(3)] == ["probe", "probe", "refused"]
    assert not health.available(31.0)
    health.end(32.0, probe=True)
    assert health.available(32.0)
    assert health.try_acquire_probe(32.0)
    assert not health.try_acquire_probe(32.0)


def test_it_closes_after_a_successful_probe() -> None:
    health = TargetHealth("a")
    health.record(RATE_LIMITED, now=0.0)
    assert health.begin(30.0) == "probe"
    health.record(ok(0.4), now=31.0)
    health.end(31.0, probe=True)
    assert health.status(31.0) == "healthy"
    assert health.cooldown_until is None
    assert health.cooldown_level == 0
    assert health.begin(31.0) == "attempt"


def test_it_needs_the_configured_number_of_probe_successes_to_close() -> None:
    health = TargetHealth("a", HealthConfig(successes_to_close=2))
    health.record(RATE_LIMITED, now=0.0)
    health.begin(30.0)
    health.record(ok(), now=31.0)
    health.end(31.0, probe=True)
    assert health.status(31.0) == "probing"
    health.begin(32.0)
    health.record(ok(), now=33.0)
    assert health.status(33.0) == "healthy"


def test_it_reopens_with_the_next_doubled_cooldown_when_a_probe_fails() -> None:
    health = TargetHealth("a")
    for now in (0.0, 1.0, 2.0):
        health.record(SERVER_ERROR, now)  # three in a row: 30 s
    assert health.begin(32.0) == "probe"
    started = health.record(SERVER_ERROR, now=33.0)  # one failed probe is enough
    assert started is not None
    assert started.trigger == "probe_failed"
    assert cooldown_of(health, 33.0) == 60.0
    assert health.status(33.0) == "cooling"


def test_it_frees_a_probe_slot_that_was_never_released() -> None:
    health = TargetHealth("a", HealthConfig(probe_lease_s=60.0))
    health.record(RATE_LIMITED, now=0.0)
    assert health.begin(30.0) == "probe"  # the attempt is lost: neither record nor end is called
    assert not health.available(89.0)
    assert health.available(90.0)


def test_it_lets_late_outcomes_from_before_the_trip_extend_but_never_deepen_a_cooldown() -> None:
    health = TargetHealth("a")
    health.record(RATE_LIMITED, now=0.0)  # cooling until 30
    health.record(RATE_LIMITED, now=1.0)  # a straggler: no doubling
    assert health.cooldown_until == 30.0
    assert health.cooldown_level == 1
    health.record(SERVER_ERROR, now=2.0)
    assert health.cooldown_until == 30.0
    health.record(fail("rate_limited", status=429, retry_after_s=90.0), now=3.0)  # a longer Retry-After
    assert health.cooldown_until == 93.0
    health.record(ok(), now=4.0)  # a straggler's success proves nothing about now
    assert health.status(4.0) == "cooling"


def test_it_counts_attempts_in_flight_and_their_load() -> None:
    health = TargetHealth("a")
    assert health.load() == 0.0
    health.begin(0.0)
    health.begin(0.0)
    assert health.in_flight == 2
    assert health.load(unmeasured_latency_s=1.5) == pytest.approx(3.0, abs=EXACT)
    health.record(ok(0.5), now=1.0)
    health.end(1.0)
    assert health.load() == pytest.approx(0.5, abs=EXACT)  # 0.5 s x 1 in flight
    health.end(2.0)
    health.end(3.0)  # one end too many never goes negative
    assert health.in_flight == 0


def test_it_adopts_a_cooldown_from_another_process_but_never_shortens_its_own() -> None:
    health = TargetHealth("a")
    health.adopt_cooldown(60.0, now=0.0)
    assert health.status(0.0) == "cooling"
    assert health.cooldown_until == 60.0
    health.adopt_cooldown(30.0, now=1.0)
    assert health.cooldown_until == 60.0
    health.adopt_cooldown(0.5, now=1.0)  # already over
    assert health.cooldown_until == 60.0


# -- views, config, registry ---------------------------------------------------------------------------------


def test_it_snapshots_every_field_the_admin_and_the_audit_show() -> None:
    health = TargetHealth("openai/gpt-4o")
    health.record(ok(0.7), now=0.0)
    health.begin(1.0)
    for now in (2.0, 3.0, 4.0):
        health.record(fail("server_error", status=503), now)
    view = health.snapshot(5.0)
    assert view == TargetStateView(
        name="openai/gpt-4o",
        status="cooling",
        available=False,
        latency_estimate_s=5.6,  # 0.7 doubled three times by the failure penalty
        observations=4,  # the answer and the three failures
        in_flight=1,
        cooldown_until=34.0,
        cooldown_level=1,
        consecutive_failures=3,
        last_error_reason="server_error",
        probes_in_flight=0,
    )
    assert view.as_dict()["status"] == "cooling"
    assert view.vitals(999.0) == health.vitals(5.0)


@pytest.mark.parametrize(
    ("status", "available", "cooldown_until"),
    [("healthy", True, 10.0), ("cooling", False, None), ("healthy", False, None), ("cooling", True, 10.0)],
)
def test_it_rejects_a_view_that_contradicts_itself(status: str, available: bool, cooldown_until: float | None) -> None:
    with pytest.raises(ValueError):
        TargetStateView(name="a", status=status, available=available, cooldown_until=cooldown_until)  # type: ignore[arg-type]


def test_it_builds_its_config_from_the_routing_settings() -> None:
    config = HealthConfig.from_settings(SettingsInForce(cooldown_base_s=5.0, cooldown_max_s=40.0))
    assert (config.cooldown_base_s, config.cooldown_max_s) == (5.0, 40.0)
    assert [config.cooldown_for(level) for level in range(5)] == [5.0, 10.0, 20.0, 40.0, 40.0]
    assert config.cooldown_for(500) == 40.0


@pytest.mark.parametrize(
    "overrides",
    [
        {"cooldown_base_s": 0.0},
        {"cooldown_base_s": 400.0},  # longer than the maximum
        {"failures_before_cooldown": 0},
        {"latency_decay_s": 0.0},
        {"half_open_probes": 0},
        {"failure_latency_factor": 0.5},
    ],
)
def test_it_rejects_an_impossible_config(overrides: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        HealthConfig(**overrides)  # type: ignore[arg-type]


def test_it_creates_a_targets_health_once_and_on_first_use() -> None:
    registry = HealthRegistry()
    assert "a" not in registry
    assert registry.peek("a") is None
    health = registry.get("a")
    assert registry.get("a") is health
    assert len(registry) == 1


def test_it_bounds_the_registry_by_dropping_the_least_recently_used() -> None:
    registry = HealthRegistry(max_targets=2)
    registry.get("a")
    registry.get("b")
    registry.get("a")  # a is used again: b is now the oldest
    registry.get("c")
    assert "b" not in registry
    assert "a" in registry
    assert "c" in registry


def test_it_forgets_targets_that_are_no_longer_configured() -> None:
    registry = HealthRegistry()
    for name in ("a", "b", "c"):
        registry.get(name)
    registry.retain(["a", "c", "unknown"])
    assert [view.name for view in registry.snapshot(0.0)] == ["a", "c"]


def test_it_resets_what_targets_learned_without_replacing_them() -> None:
    registry = HealthRegistry()
    health = registry.get("a")
    health.record(ok(0.9), now=0.0)
    health.begin(0.0)
    health.record(RATE_LIMITED, now=1.0)
    registry.reset()
    assert registry.get("a") is health  # candidates holding it keep seeing the same object
    assert health.snapshot(2.0) == TargetStateView(name="a", status="healthy", available=True)


def test_it_applies_new_rules_to_known_targets_without_losing_their_state() -> None:
    registry = HealthRegistry()
    health = registry.get("a")
    health.record(ok(0.3), now=0.0)
    registry.configure(HealthConfig(cooldown_base_s=5.0, cooldown_max_s=10.0))
    health.record(RATE_LIMITED, now=1.0)
    assert cooldown_of(health, 1.0) == 5.0
    assert health.latency_estimate_s == pytest.approx(1.0, abs=EXACT)  # kept, then penalised to the floor
    assert registry.get("b").config.cooldown_base_s == 5.0
