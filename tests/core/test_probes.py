"""Background probes, the pure decision: which targets are probed, with what call, and what a result does."""

from __future__ import annotations

import pytest

from routing.core.health import COOLING, HEALTHY, PROBING, BreakerClosed, HealthChange, TargetHealth
from routing.core.health_config import HealthConfig
from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.core.probes import (
    ProbeCandidate,
    ProbeTask,
    apply_probe,
    lease_timing,
    mode_problem,
    plan_probes,
    probe_mode,
    probe_reason,
    result_word,
)

CONFIG = HealthConfig(cooldown_base_s=30.0, cooldown_max_s=300.0)


def heard() -> tuple[TargetHealth, list[HealthChange]]:
    changes: list[HealthChange] = []
    return TargetHealth("a", CONFIG, changes.append), changes


def server_error() -> AttemptOutcome:
    return AttemptOutcome.failure(ErrorClass.TRANSIENT, "server_error", status=500, latency_s=0.1)


def connect_error() -> AttemptOutcome:
    return AttemptOutcome.failure(ErrorClass.TRANSIENT, "connect_error", latency_s=0.1)


def auth() -> AttemptOutcome:
    return AttemptOutcome.failure(ErrorClass.INCOMPATIBLE, "auth", status=401, latency_s=0.1)


def rate_limited(retry_after_s: float | None = None) -> AttemptOutcome:
    return AttemptOutcome.failure(ErrorClass.TRANSIENT, "rate_limited", status=429, latency_s=0.1,
                                  retry_after_s=retry_after_s)


def invalid() -> AttemptOutcome:
    return AttemptOutcome.failure(ErrorClass.INVALID_RESPONSE, "schema", status=200, latency_s=0.1)


def tripped(*outcomes: AttemptOutcome, now: float = 0.0) -> tuple[TargetHealth, list[HealthChange]]:
    health, changes = heard()
    for outcome in outcomes:
        health.record(outcome, now)
    return health, changes


@pytest.mark.parametrize(("kind", "configured", "mode"), [
    ("openai", "", "models"),
    ("anthropic", "", "models"),
    ("gemini", "", "models"),
    ("azure_openai", "", "completion"),
    ("openai", "completion", "completion"),
    ("anthropic", "off", "off"),
    ("azure_openai", "off", "off"),
])
def test_it_probes_with_the_cheapest_call_that_proves_the_model_unless_configured(kind: str, configured: str,
                                                                                   mode: str) -> None:
    assert probe_mode(kind, configured) == mode


def test_it_refuses_a_models_probe_where_the_listing_cannot_prove_a_deployment() -> None:
    assert mode_problem("azure_openai", "models") is not None
    assert "completion" in (mode_problem("azure_openai", "models") or "")
    assert mode_problem("openai", "models") is None
    assert mode_problem("openai", "sometimes") == "expected one of models, completion, off, got 'sometimes'"
    assert mode_problem("azure_openai", "") is None


def test_it_probes_a_target_cooling_for_5xx_or_network_failures() -> None:
    health, _ = tripped(server_error(), server_error(), server_error())
    assert (health.status(1.0), probe_reason(health, 1.0)) == (COOLING, "transient")
    health, _ = tripped(connect_error(), connect_error(), connect_error())
    assert probe_reason(health, 1.0) == "transient"


def test_it_probes_a_lockout() -> None:
    health, _ = tripped(auth())
    assert probe_reason(health, 1.0) == "lockout"


def test_it_never_probes_a_429_nor_invalid_answers_nor_a_healthy_or_half_open_target() -> None:
    health, _ = tripped(rate_limited(retry_after_s=120.0))
    assert (health.status(1.0), probe_reason(health, 1.0)) == (COOLING, None)
    health, _ = tripped(*[invalid()] * 5)
    assert (health.status(1.0), probe_reason(health, 1.0)) == (COOLING, None)
    health, _ = heard()
    assert probe_reason(health, 1.0) is None
    health, _ = tripped(server_error(), server_error(), server_error())
    assert (health.status(31.0), probe_reason(health, 31.0)) == (PROBING, None)  # live traffic probes it


def test_a_429_arriving_while_cooling_for_5xx_keeps_the_prober_away_even_when_it_does_not_extend() -> None:
    health, _ = tripped(server_error(), server_error(), server_error())  # cooling to 30
    health.record(rate_limited(retry_after_s=5.0), now=1.0)  # shorter than the cooldown: no extension
    assert health.cooldown_until == 30.0
    assert probe_reason(health, 2.0) is None
    assert apply_probe(health, AttemptOutcome.success(0.1), started=2.0, now=2.1) == "unchanged"
    assert health.status(2.1) == COOLING


def test_a_429_verdict_from_another_process_keeps_the_prober_away() -> None:
    health, _ = tripped(server_error(), server_error(), server_error())  # cooling to 30 here
    assert not health.adopt_cooldown(20.0, now=1.0, reason="rate_limited", origin="other")
    assert probe_reason(health, 2.0) is None


def test_an_adopted_cooldown_is_probed_by_the_kind_its_reason_names() -> None:
    health, _ = heard()
    assert health.adopt_cooldown(30.0, now=0.0, reason="server_error", origin="other")
    assert probe_reason(health, 1.0) == "transient"
    health, _ = heard()
    assert health.adopt_cooldown(300.0, now=0.0, reason="auth", origin="other")
    assert probe_reason(health, 1.0) == "lockout"
    health, _ = heard()
    assert health.adopt_cooldown(30.0, now=0.0, reason="shared", origin="other")  # a word naming no kind
    assert probe_reason(health, 1.0) is None


def test_a_passing_probe_ends_a_5xx_cooldown_early_and_says_so_to_the_listener() -> None:
    health, changes = tripped(server_error(), server_error(), server_error())
    assert apply_probe(health, AttemptOutcome.success(0.1), started=5.0, now=5.2) == "closed"
    assert (health.status(5.2), health.cooldown_level, health.open_kind) == (HEALTHY, 0, None)
    assert changes[-1] == BreakerClosed("a", probe_started=5.0, early=True)


def test_a_passing_probe_ends_a_lockout() -> None:
    health, _ = tripped(auth())
    assert apply_probe(health, AttemptOutcome.success(0.1), started=10.0, now=10.1) == "closed"
    assert health.status(10.1) == HEALTHY


def test_a_probe_that_started_before_the_latest_failure_verdict_closes_nothing() -> None:
    health, _ = tripped(server_error(), server_error(), server_error())
    health.record(auth(), now=6.0)  # a lockout while the probe was out
    assert apply_probe(health, AttemptOutcome.success(0.1), started=5.0, now=6.5) == "unchanged"
    assert health.status(6.5) == COOLING


def test_a_failing_lockout_probe_keeps_the_lockout_in_force_from_now() -> None:
    health, changes = tripped(auth())  # locked out until 300
    assert apply_probe(health, auth(), started=200.0, now=200.1) == "extended"
    assert health.cooldown_until == pytest.approx(500.1)
    assert health.cooldown_level == 1  # the doubling is for live attempts
    assert changes[-1].__class__.__name__ == "CooldownStarted"


def test_a_failing_transient_probe_changes_nothing() -> None:
    health, changes = tripped(server_error(), server_error(), server_error())
    before = (health.cooldown_until, health.cooldown_level, len(changes), health.latency_estimate_s)
    assert apply_probe(health, server_error(), started=5.0, now=5.1) == "unchanged"
    assert (health.cooldown_until, health.cooldown_level, len(changes), health.latency_estimate_s) == before


def test_a_probe_answered_with_a_429_honours_its_retry_after_and_stops_further_probes() -> None:
    health, _ = tripped(server_error(), server_error(), server_error())  # cooling to 30
    assert apply_probe(health, rate_limited(retry_after_s=100.0), started=5.0, now=5.1) == "extended"
    assert health.cooldown_until == pytest.approx(105.1)
    assert probe_reason(health, 6.0) is None


def test_a_close_by_another_process_probe_applies_while_cooling_here_but_not_over_a_429() -> None:
    health, _ = tripped(server_error(), server_error(), server_error())
    assert health.adopt_probe_close(probe_started=5.0, now=5.5)
    assert health.status(5.5) == HEALTHY
    health, _ = tripped(rate_limited(retry_after_s=60.0))
    assert not health.adopt_probe_close(probe_started=5.0, now=5.5)
    assert health.status(5.5) == COOLING


def test_it_plans_probes_only_for_targets_that_want_one_and_whose_provider_allows_it() -> None:
    cooling, _ = tripped(server_error(), server_error(), server_error())
    locked, _ = tripped(auth())
    limited, _ = tripped(rate_limited(retry_after_s=60.0))
    off, _ = tripped(auth())
    healths = {"p/cooling": cooling, "p/locked": locked, "p/limited": limited, "q/off": off}
    candidates = [
        ProbeCandidate("p/cooling", "p", "models"),
        ProbeCandidate("p/locked", "p", "models"),
        ProbeCandidate("p/limited", "p", "models"),
        ProbeCandidate("q/off", "q", "off"),
        ProbeCandidate("p/never-tried", "p", "models"),
    ]
    assert plan_probes(candidates, healths.get, now=1.0) == [
        ProbeTask("p/cooling", "p", "models", "transient"),
        ProbeTask("p/locked", "p", "models", "lockout"),
    ]


def test_result_words_and_lease_timing() -> None:
    assert result_word(AttemptOutcome.success(0.1)) == "passed"
    assert result_word(auth()) == "auth"
    assert lease_timing(15.0) == (5.0, 15.0)
    assert lease_timing(0.2) == (0.2, pytest.approx(0.6))
