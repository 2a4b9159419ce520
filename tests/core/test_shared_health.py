"""What a target's health tells the shared store, and how it takes other processes' verdicts."""

from __future__ import annotations

from routing.core.health import COOLING, HEALTHY, PROBING, BreakerClosed, CooldownStarted, HealthChange, TargetHealth
from routing.core.health_config import HealthConfig
from routing.core.outcome import AttemptOutcome, ErrorClass

CONFIG = HealthConfig(cooldown_base_s=10.0, cooldown_max_s=100.0)


def heard() -> tuple[TargetHealth, list[HealthChange]]:
    changes: list[HealthChange] = []
    return TargetHealth("a", CONFIG, changes.append), changes


def lockout() -> AttemptOutcome:
    return AttemptOutcome.failure(ErrorClass.INCOMPATIBLE, "auth", status=401, latency_s=0.1)


def rate_limited(retry_after_s: float | None = None) -> AttemptOutcome:
    return AttemptOutcome.failure(ErrorClass.TRANSIENT, "rate_limited", status=429, latency_s=0.1,
                                  retry_after_s=retry_after_s)


def test_the_listener_hears_a_trip_an_extension_by_retry_after_and_a_probe_close() -> None:
    health, changes = heard()
    health.record(rate_limited(), now=0.0)  # 10 s
    health.record(rate_limited(retry_after_s=50.0), now=1.0)  # a straggler with a longer verdict: extends
    health.record(rate_limited(), now=2.0)  # no explicit verdict: nothing to say
    assert [type(c) for c in changes] == [CooldownStarted, CooldownStarted]
    first, extension = changes
    assert isinstance(first, CooldownStarted)
    assert isinstance(extension, CooldownStarted)
    assert (first.until, extension.until, extension.level) == (10.0, 51.0, 1)
    assert health.begin(60.0) == "probe"
    health.record(AttemptOutcome.success(0.2), now=60.5)
    assert changes[-1] == BreakerClosed("a", probe_started=60.0)


def test_an_adopted_cooldown_opens_the_breaker_names_its_origin_and_is_not_echoed() -> None:
    health, changes = heard()
    assert health.adopt_cooldown(30.0, now=0.0, reason="auth", origin="host/1/ab")
    assert (health.status(0.0), health.shared_origin, health.last_error_reason) == (COOLING, "host/1/ab", "auth")
    assert changes == []


def test_adopting_never_shortens_a_cooldown_the_later_end_wins() -> None:
    health, _ = heard()
    health.record(lockout(), now=0.0)  # 100 s here
    assert not health.adopt_cooldown(40.0, now=1.0, origin="other")
    assert (health.cooldown_until, health.shared_origin) == (100.0, None)
    assert health.adopt_cooldown(150.0, now=1.0, origin="other")
    assert (health.cooldown_until, health.shared_origin) == (150.0, "other")


def test_a_close_elsewhere_applies_only_once_this_cooldown_is_over() -> None:
    health, _ = heard()
    health.adopt_cooldown(30.0, now=0.0, origin="other")
    assert not health.adopt_close(probe_started=29.0, now=29.5)  # still cooling here: never shortened
    assert health.status(29.5) == COOLING
    assert health.adopt_close(probe_started=30.5, now=31.0)
    assert (health.status(31.0), health.cooldown_level, health.shared_origin) == (HEALTHY, 0, None)


def test_a_close_by_a_probe_older_than_this_process_latest_failure_is_ignored() -> None:
    health, _ = heard()
    health.record(rate_limited(), now=0.0)  # cooling to 10
    assert health.status(11.0) == PROBING
    health.adopt_cooldown(12.0, now=11.0, origin="other")  # a newer verdict arrived at 11 ...
    assert not health.adopt_close(probe_started=10.5, now=12.5)  # ... after the probe that closed elsewhere
    assert health.status(12.5) == PROBING
    assert health.adopt_close(probe_started=12.1, now=12.5)
