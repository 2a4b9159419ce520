"""Failures the request itself caused: they never touch the target's health, whatever the client sends."""

from __future__ import annotations

import pytest

from routing.core.answer import Answer
from routing.core.health import TargetHealth
from routing.core.outcome import AttemptOutcome, ErrorClass, ended_by_client_deadline
from routing.core.validate import ValidationRules, validate_answer


def no_schema_check(_schema: object, _value: object) -> list[str]:
    return []


def timeout(latency_s: float = 0.1) -> AttemptOutcome:
    return AttemptOutcome.failure(ErrorClass.TRANSIENT, "timeout", latency_s=latency_s)


def test_it_never_cools_or_slows_a_target_for_failures_the_client_caused() -> None:
    health = TargetHealth("t")
    for turn in range(10):
        assert health.record(timeout().by_client(), float(turn)) is None
        truncated = AttemptOutcome.failure(ErrorClass.INVALID_RESPONSE, "truncated", status=200, latency_s=0.2)
        assert health.record(truncated.by_client(), float(turn)) is None
    assert health.status(10.0) == "healthy"
    assert (health.consecutive_failures, health.latency_estimate_s, health.observations) == (0, None, 0)


def test_a_client_caused_failure_of_a_half_open_attempt_does_not_reopen_the_breaker() -> None:
    health = TargetHealth("t")
    for turn in range(3):
        health.record(AttemptOutcome.failure(ErrorClass.TRANSIENT, "server_error", status=500), float(turn))
    until = health.cooldown_until
    assert until is not None
    assert health.begin(until) == "probe"
    assert health.record(timeout().by_client(), until) is None
    health.end(until, probe=True)
    assert (health.status(until), health.cooldown_until) == ("probing", until)


def test_the_same_failure_without_the_mark_still_counts() -> None:
    health = TargetHealth("t")
    for turn in range(3):
        health.record(timeout(), float(turn))
    assert health.status(3.0) == "cooling"


@pytest.mark.parametrize(("outcome", "cause"), [
    (AttemptOutcome.success(0.1), None),
    (timeout(), "target"),
    (timeout().by_client(), "client"),
    (AttemptOutcome.failure(ErrorClass.PERMANENT, "bad_request", status=400), "client"),
    (AttemptOutcome.failure(ErrorClass.INCOMPATIBLE, "context_overflow", status=400), "client"),
    (AttemptOutcome.failure(ErrorClass.INCOMPATIBLE, "not_found", status=404), "target"),
    (AttemptOutcome.failure(ErrorClass.TRANSIENT, "gateway_overloaded"), "gateway"),
])
def test_it_says_whose_failure_an_outcome_was(outcome: AttemptOutcome, cause: str | None) -> None:
    assert outcome.cause == cause


@pytest.mark.parametrize(("reason", "now", "cut_at", "expected"), [
    ("timeout", 1.0, 1.0, True),  # cut off exactly when the client's deadline ended the attempt
    ("timeout", 1.2, 1.0, True),
    ("stream_cut", 1.0, 1.0, True),
    ("connect_error", 1.0, 1.0, True),
    ("timeout", 0.5, 1.0, False),  # the target failed before the client's deadline: its own failure
    ("timeout", 1.0, None, False),  # the provider's timeout or the gateway's default deadline ended it
    ("server_error", 1.0, 1.0, False),
])
def test_it_tells_a_cut_at_the_clients_deadline_from_the_targets_own_timeout(
        reason: str, now: float, cut_at: float | None, expected: bool) -> None:
    outcome = AttemptOutcome.failure(ErrorClass.TRANSIENT, reason)
    assert ended_by_client_deadline(outcome, now=now, cut_at=cut_at) is expected


@pytest.mark.parametrize(("answer", "rules", "reason"), [
    (Answer('{"a":', "length"), ValidationRules(refuse_truncation=True, json_required=True), "truncated"),
    (Answer("not json", "stop"), ValidationRules(json_required=True), "schema"),
    (Answer("hi", "stop"), ValidationRules(min_output_chars=50), "too_short"),
    (Answer("hi", "stop"), ValidationRules(tool_choice="required"), "tool_call"),
])
def test_a_rejection_of_what_the_request_asked_for_is_the_clients(
        answer: Answer, rules: ValidationRules, reason: str) -> None:
    verdict = validate_answer(answer, rules, schema_validator=no_schema_check)
    outcome = verdict.as_outcome(latency_s=0.3)
    assert (outcome.reason, outcome.error_class, outcome.client_caused) == (
        reason, ErrorClass.INVALID_RESPONSE, True)
    assert not outcome.punishes_target


def test_an_envelope_that_does_not_parse_is_the_targets() -> None:
    verdict = validate_answer(None, ValidationRules(), schema_validator=no_schema_check)
    outcome = verdict.as_outcome(latency_s=0.3)
    assert (outcome.reason, outcome.client_caused, outcome.punishes_target) == ("malformed", False, True)
