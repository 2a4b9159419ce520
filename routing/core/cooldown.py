"""Which failures count against a target, how they trip its breaker, and the record of a trip.

Only outcomes that ``punishes_target`` touch the state: never the client's own mistakes (PERMANENT) nor a
request this target cannot serve (INCOMPATIBLE context overflow, unsupported parameter). 429 trips at once;
401/403/404 (auth, not found, quota) take ``cooldown_max`` at once. The breaker itself is
``routing.core.health.TargetHealth``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from routing.core.outcome import TARGET_FAULT_REASONS, AttemptOutcome, ErrorClass

# How a failure trips the breaker; None: the failure says nothing about the target.
FailureKind = Literal["rate_limited", "lockout", "transient", "invalid"]
Trigger = Literal["rate_limited", "lockout", "failures", "invalid_responses", "probe_failed"]

RATE_LIMIT_STATUSES = frozenset({429})
LOCKOUT_STATUSES = frozenset({401, 403, 404})  # the reasons are errors.TARGET_FAULT_REASONS
# The reason words of the other kinds, for a verdict that arrives as a word only (another process's cooldown).
TRANSIENT_REASONS = frozenset({"overloaded", "server_error", "connect_error", "timeout", "connection_lost",
                               "stream_cut"})
INVALID_REASONS = frozenset({"malformed", "truncated", "schema", "tool_call", "too_short", "custom"})
# Which kind outweighs which when several verdicts hold one breaker open: a 429's Retry-After above all.
KIND_RANK: dict[FailureKind, int] = {"invalid": 1, "transient": 2, "lockout": 3, "rate_limited": 4}


@dataclass(frozen=True, slots=True)
class CooldownStarted:
    """What ``TargetHealth.record`` returns when it opened the breaker: for metrics, audit, shared stores."""

    target: str
    trigger: Trigger
    reason: str  # the outcome's reason word
    duration_s: float
    until: float
    level: int  # trips since the breaker last closed, this one included


@dataclass(frozen=True, slots=True)
class BreakerClosed:
    """What a target's health reports when a half-open probe's success closed its breaker."""

    target: str
    probe_started: float  # when the probe that closed it started, on the caller's clock
    # True: a background probe (routing.gateway.background.prober) ended the cooldown before its end, which other
    # processes may follow while still cooling; False: a half-open attempt after the end (routing.core.health).
    early: bool = False


# What a TargetHealth tells its listener (the shared health publisher): a cooldown started or was extended by
# an explicit verdict (Retry-After, lockout), or the breaker closed after a probe.
HealthChange = CooldownStarted | BreakerClosed


def failure_kind(outcome: AttemptOutcome) -> FailureKind | None:
    """How a failed outcome counts against its target; None when it says nothing about the target.

    Only outcomes that ``punishes_target`` count: never PERMANENT (the client's own bad request), never an
    INCOMPATIBLE reason about this one request (context overflow, unsupported parameter; also a 429 that
    says the request alone exceeds the rate limit). Then: 429 / ``rate_limited`` trips at once; 401/403/404
    / ``auth`` / ``not_found`` / ``quota`` lock the target out for the maximum; INVALID_RESPONSE has its own
    run; the rest (TRANSIENT and AMBIGUOUS: 5xx, overloaded, connect, timeout, stream cut) is transient.
    """
    if not outcome.punishes_target:
        return None
    if outcome.reason == "rate_limited" or outcome.status in RATE_LIMIT_STATUSES:
        return "rate_limited"
    if outcome.reason in TARGET_FAULT_REASONS or outcome.status in LOCKOUT_STATUSES:
        return "lockout"
    if outcome.error_class is ErrorClass.INVALID_RESPONSE:
        return "invalid"
    return "transient"


def reason_kind(reason: str) -> FailureKind | None:
    """The failure kind a reason word stands for; None for a word that names none (``shared``, unknown)."""
    if reason == "rate_limited":
        return "rate_limited"
    if reason in TARGET_FAULT_REASONS:
        return "lockout"
    if reason in TRANSIENT_REASONS:
        return "transient"
    if reason in INVALID_REASONS:
        return "invalid"
    return None
