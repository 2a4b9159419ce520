"""TargetHealth: the one model of a target's health, read by the adaptive selector and the fallback policy.

Each concrete target (a provider model) has one ``TargetHealth`` per process. It holds

- a peak-EWMA latency estimate (time to first byte for streams), fed by every attempt;
- the number of attempts in flight;
- one circuit breaker, which *is* the cooldown: there is no second notion of "suppressed".

The breaker is a single state machine; the error class and reason of a failure only decide how fast it trips::

      success (resets the runs)
         ┌───┐
         v   │     429, 401/403/404: at once
      ┌─────────┐  3 transient in a row           ┌─────────┐
      │ healthy │ ──────────────────────────────> │ cooling │  open: every attempt refused
      └─────────┘  5 invalid responses in a row   └─────────┘
           ^                                           │    ^
           │  successes_to_close probe successes       │    │  a failed probe re-opens with
           │  (the doubling resets)     cooldown_until │    │  the next (doubled) cooldown
           │                                  reached  v    │
           │                                      ┌─────────┐
           └───────────────────────────────────── │ probing │  half-open: at most
                                                  └─────────┘  half_open_probes at a time

Cooldown length: ``min(cooldown_max, cooldown_base * 2 ** level)`` where ``level`` counts trips since the
breaker last closed; 401/403/404 (auth, not found, quota) take ``cooldown_max`` at once; a longer
Retry-After wins, up to ``cooldown_max``. Only outcomes that ``punishes_target`` touch the state: never the
client's own mistakes (PERMANENT) nor a request this target cannot serve (INCOMPATIBLE context overflow,
unsupported parameter).

Time is a parameter (``now``, seconds on one clock; the wall clock keeps ``cooldown_until`` displayable).
Not thread-safe: one event loop owns a registry.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from routing.core.errors import TARGET_FAULT_REASONS, AttemptOutcome, ErrorClass
from routing.core.table import RoutingSettings

Status = Literal["healthy", "cooling", "probing"]
Admission = Literal["attempt", "probe", "refused"]
# How a failure trips the breaker; None: the failure says nothing about the target.
FailureKind = Literal["rate_limited", "lockout", "transient", "invalid"]
Trigger = Literal["rate_limited", "lockout", "failures", "invalid_responses", "probe_failed"]
# What the selector reads per target, as one tuple because it is read per candidate per request:
# (status, latency estimate or None when never measured, attempts in flight, cooldown_until, available).
Vitals = tuple[Status, float | None, int, float | None, bool]

HEALTHY: Status = "healthy"
COOLING: Status = "cooling"
PROBING: Status = "probing"

RATE_LIMIT_STATUSES = frozenset({429})
LOCKOUT_STATUSES = frozenset({401, 403, 404})  # the reasons are errors.TARGET_FAULT_REASONS


@dataclass(frozen=True, slots=True)
class HealthConfig:
    """The rules of the health model. Only the cooldown lengths come from settings; the rest are defaults."""

    cooldown_base_s: float = 30.0
    cooldown_max_s: float = 300.0
    failures_before_cooldown: int = 3  # transient or ambiguous failures in a row (5xx, connect, timeout, cut)
    invalid_before_cooldown: int = 5  # invalid responses in a row (partly the request's fault: more lenient)
    latency_decay_s: float = 10.0  # EWMA time constant: a sample's weight is 1 - exp(-gap / this)
    failure_latency_factor: float = 2.0  # a failure counts as at least this multiple of the current estimate
    failure_latency_floor_s: float = 1.0  # ... and at least this long, so a target that fails fast looks slow
    failure_latency_cap_s: float = 120.0  # the penalty never grows past this (a longer observed time counts)
    half_open_probes: int = 1  # attempts allowed at a time once the cooldown is over
    successes_to_close: int = 1  # probe successes that close the breaker
    probe_lease_s: float = 600.0  # a probe slot never released (a lost attempt) frees itself after this

    def __post_init__(self) -> None:
        if not 0 < self.cooldown_base_s <= self.cooldown_max_s:
            raise ValueError("cooldown_base_s must be > 0 and <= cooldown_max_s")
        if self.failures_before_cooldown < 1 or self.invalid_before_cooldown < 1:
            raise ValueError("failure thresholds must be >= 1")
        if self.latency_decay_s <= 0:
            raise ValueError("latency_decay_s must be > 0")
        if self.failure_latency_factor < 1 or self.failure_latency_floor_s < 0:
            raise ValueError("failure_latency_factor must be >= 1 and failure_latency_floor_s >= 0")
        if self.half_open_probes < 1 or self.successes_to_close < 1 or self.probe_lease_s <= 0:
            raise ValueError("half_open_probes, successes_to_close and probe_lease_s must be positive")

    @staticmethod
    def from_settings(settings: RoutingSettings) -> HealthConfig:
        """The config for the PRO_ROUTING_COOLDOWN_BASE / _MAX values in force."""
        return HealthConfig(cooldown_base_s=settings.cooldown_base_s, cooldown_max_s=settings.cooldown_max_s)

    def cooldown_for(self, level: int) -> float:
        """Cooldown for trip ``level`` (from 0) since the breaker last closed: base, doubled, capped."""
        if level >= 64:  # far past any cap; keeps the shift small
            return self.cooldown_max_s
        return min(self.cooldown_max_s, self.cooldown_base_s * (1 << level))


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
class TargetStateView:
    """A frozen copy of one target's health at ``now``: for the admin page, the audit event and metrics.

    It also answers ``vitals`` so the selector (and the explain endpoint) can rank over frozen copies.
    """

    name: str
    status: Status
    available: bool
    latency_estimate_s: float | None = None
    in_flight: int = 0
    cooldown_until: float | None = None
    cooldown_level: int = 0
    consecutive_failures: int = 0
    last_error_reason: str | None = None
    probes_in_flight: int = 0

    def __post_init__(self) -> None:
        # The selector trusts "no cooldown_until" to mean healthy and available, as it does for live health.
        if (self.status == HEALTHY) != (self.cooldown_until is None):
            raise ValueError("cooldown_until is set exactly when the status is cooling or probing")
        if self.available != (self.status == HEALTHY) and self.status != PROBING:
            raise ValueError("a healthy target is available and a cooling one is not")

    def vitals(self, now: float) -> Vitals:
        """The selector's inputs as frozen at snapshot time (``now`` is ignored)."""
        return (self.status, self.latency_estimate_s, self.in_flight, self.cooldown_until, self.available)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready fields, for the audit event."""
        return asdict(self)


class TargetHealth:
    """The health of one target in this process. Mutable; every method takes ``now``.

    The engine's side of the contract, per attempt: ``begin`` (refused while cooling or when no probe slot is
    free), ``record`` with the outcome (at the first byte for a stream), ``end`` when the attempt is over.
    """

    __slots__ = (
        "name",
        "config",
        "latency_estimate_s",
        "last_sample_at",
        "in_flight",
        "cooldown_until",
        "cooldown_level",
        "consecutive_failures",
        "last_error_reason",
        "_transient_run",
        "_invalid_run",
        "_probe_leases",
        "_probe_successes",
    )

    def __init__(self, name: str, config: HealthConfig | None = None) -> None:
        self.name = name
        self.config = config or HealthConfig()
        self.reset()

    def reset(self) -> None:
        """Forget everything learned: healthy, unmeasured, nothing in flight. The object stays the same."""
        self.latency_estimate_s: float | None = None  # None until the first sample
        self.last_sample_at: float | None = None
        self.in_flight = 0
        self.cooldown_until: float | None = None  # None: breaker closed
        self.cooldown_level = 0  # trips since the breaker last closed; drives the doubling
        self.consecutive_failures = 0  # health-affecting failures since the last success
        self.last_error_reason: str | None = None
        self._transient_run = 0
        self._invalid_run = 0
        self._probe_leases: list[float] = []  # when each outstanding half-open probe started
        self._probe_successes = 0

    # -- reading -------------------------------------------------------------------------------------------

    def status(self, now: float) -> Status:
        """``healthy`` (closed), ``cooling`` (open until ``cooldown_until``) or ``probing`` (half-open)."""
        until = self.cooldown_until
        if until is None:
            return HEALTHY
        return COOLING if now < until else PROBING

    def available(self, now: float) -> bool:
        """Whether an attempt may start now: healthy, or probing with a free probe slot."""
        until = self.cooldown_until
        if until is None:
            return True
        if now < until:
            return False
        return self._live_probes(now) < self.config.half_open_probes

    def load(self, *, unmeasured_latency_s: float = 0.0) -> float:
        """Outstanding work in seconds: latency estimate x attempts in flight (0 when idle).

        Idle targets tie at 0 so that the weights, not raw latency, decide among them; see the selector.
        """
        estimate = self.latency_estimate_s
        return (unmeasured_latency_s if estimate is None else estimate) * self.in_flight

    def vitals(self, now: float) -> Vitals:
        """The selector's inputs in one call: (status, latency, in flight, cooldown_until, available)."""
        until = self.cooldown_until
        if until is None:
            return (HEALTHY, self.latency_estimate_s, self.in_flight, None, True)
        if now < until:
            return (COOLING, self.latency_estimate_s, self.in_flight, until, False)
        free = self._live_probes(now) < self.config.half_open_probes
        return (PROBING, self.latency_estimate_s, self.in_flight, until, free)

    def snapshot(self, now: float) -> TargetStateView:
        """A frozen copy of this target's state at ``now``."""
        return TargetStateView(
            name=self.name,
            status=self.status(now),
            available=self.available(now),
            latency_estimate_s=self.latency_estimate_s,
            in_flight=self.in_flight,
            cooldown_until=self.cooldown_until,
            cooldown_level=self.cooldown_level,
            consecutive_failures=self.consecutive_failures,
            last_error_reason=self.last_error_reason,
            probes_in_flight=self._live_probes(now),
        )

    # -- attempts ------------------------------------------------------------------------------------------

    def try_acquire_probe(self, now: float) -> bool:
        """Take a half-open probe slot; False unless the target is probing and a slot is free."""
        until = self.cooldown_until
        if until is None or now < until:
            return False
        lease_s = self.config.probe_lease_s
        self._probe_leases = [t for t in self._probe_leases if now - t < lease_s]
        if len(self._probe_leases) >= self.config.half_open_probes:
            return False
        self._probe_leases.append(now)
        return True

    def begin(self, now: float) -> Admission:
        """Admit an attempt: ``attempt`` when healthy, ``probe`` when it took a probe slot, else ``refused``.

        An admitted attempt counts as in flight until ``end``; pass ``probe=True`` there for a probe.
        """
        status = self.status(now)
        if status == HEALTHY:
            self.in_flight += 1
            return "attempt"
        if status == PROBING and self.try_acquire_probe(now):
            self.in_flight += 1
            return "probe"
        return "refused"

    def end(self, now: float, *, probe: bool = False) -> None:
        """The attempt is over (answered, failed, cancelled): no longer in flight; a probe frees its slot."""
        if self.in_flight > 0:
            self.in_flight -= 1
        if probe and self._probe_leases:
            self._probe_leases.pop(0)

    # -- outcomes ------------------------------------------------------------------------------------------

    def observe_latency(self, sample_s: float, now: float) -> None:
        """Feed one latency sample into the peak EWMA.

        A sample above the estimate replaces it at once (the peak). A lower one is blended in with weight
        ``1 - exp(-gap / latency_decay_s)``, where ``gap`` is the time since the previous sample: the estimate
        decays exponentially with time, not with the number of samples, so a burst of fast answers arriving
        together cannot erase a slow one, and a stale estimate is replaced by the first fresh sample.
        """
        sample = max(sample_s, 0.0)
        estimate = self.latency_estimate_s
        last = self.last_sample_at
        if estimate is None or last is None or sample >= estimate:
            self.latency_estimate_s = sample
        else:
            keep = math.exp(-max(now - last, 0.0) / self.config.latency_decay_s)
            self.latency_estimate_s = estimate * keep + sample * (1.0 - keep)
        self.last_sample_at = now if last is None else max(last, now)

    def record(self, outcome: AttemptOutcome, now: float) -> CooldownStarted | None:
        """Apply one attempt's outcome; returns the cooldown it started, if any.

        Successes feed their latency; failures that are the target's fault feed a penalised latency (so a
        target that fails fast never looks fast) and drive the breaker. While cooling, late outcomes of
        attempts started before the trip only update the latency, except that a longer Retry-After or a
        lockout extends the cooldown (never shortens it, never advances the doubling).
        """
        if outcome.ok:
            self._record_success(outcome.latency_s, now)
            return None
        kind = failure_kind(outcome)
        if kind is None:
            return None
        self.observe_latency(self._penalised(outcome.latency_s), now)
        self.consecutive_failures += 1
        self.last_error_reason = outcome.reason
        status = self.status(now)
        if status == COOLING:
            self._extend(kind, outcome, now)
            return None
        if status == PROBING:
            return self._trip("probe_failed", kind, outcome, now)
        if kind == "rate_limited":
            return self._trip("rate_limited", kind, outcome, now)
        if kind == "lockout":
            return self._trip("lockout", kind, outcome, now)
        if kind == "invalid":
            self._invalid_run += 1
            if self._invalid_run >= self.config.invalid_before_cooldown:
                return self._trip("invalid_responses", kind, outcome, now)
            return None
        self._transient_run += 1
        if self._transient_run >= self.config.failures_before_cooldown:
            return self._trip("failures", kind, outcome, now)
        return None

    def adopt_cooldown(self, until: float, now: float, *, reason: str = "shared") -> None:
        """Open the breaker until ``until`` because another process did (shared cooldown store).

        Never shortens a cooldown this process already has.
        """
        if until <= now or (self.cooldown_until is not None and until <= self.cooldown_until):
            return
        if self.cooldown_until is None:
            self.cooldown_level += 1
        self.cooldown_until = until
        self.last_error_reason = reason
        self._open_reset()

    def _record_success(self, latency_s: float, now: float) -> None:
        self.observe_latency(latency_s, now)
        self.consecutive_failures = 0
        self._transient_run = 0
        self._invalid_run = 0
        if self.status(now) != PROBING:
            return  # healthy: nothing to reset; cooling: a straggler from before the trip proves nothing
        self._probe_successes += 1
        if self._probe_successes >= self.config.successes_to_close:
            self.cooldown_until = None
            self.cooldown_level = 0
            self._probe_leases = []
            self._probe_successes = 0

    def _penalised(self, observed_s: float) -> float:
        config = self.config
        estimate = self.latency_estimate_s or 0.0
        penalty = min(
            config.failure_latency_cap_s,
            max(estimate * config.failure_latency_factor, config.failure_latency_floor_s),
        )
        return max(observed_s, penalty)

    def _duration(self, kind: FailureKind, outcome: AttemptOutcome, level: int) -> float:
        config = self.config
        duration = config.cooldown_max_s if kind == "lockout" else config.cooldown_for(level)
        if outcome.retry_after_s is not None and outcome.retry_after_s > duration:
            duration = min(config.cooldown_max_s, outcome.retry_after_s)
        return duration

    def _trip(self, trigger: Trigger, kind: FailureKind, outcome: AttemptOutcome, now: float) -> CooldownStarted:
        duration = self._duration(kind, outcome, self.cooldown_level)
        self.cooldown_level += 1
        self.cooldown_until = now + duration
        self._open_reset()
        return CooldownStarted(
            target=self.name,
            trigger=trigger,
            reason=outcome.reason,
            duration_s=duration,
            until=self.cooldown_until,
            level=self.cooldown_level,
        )

    def _extend(self, kind: FailureKind, outcome: AttemptOutcome, now: float) -> None:
        # The doubling level is not advanced: this failure belongs to the burst that already tripped it.
        # Only an explicit verdict (a lockout, a Retry-After) says the cooldown must last longer.
        if kind == "lockout":
            until = now + self.config.cooldown_max_s
        elif outcome.retry_after_s is not None:
            until = now + min(outcome.retry_after_s, self.config.cooldown_max_s)
        else:
            return
        if self.cooldown_until is not None and until > self.cooldown_until:
            self.cooldown_until = until

    def _open_reset(self) -> None:
        self._transient_run = 0
        self._invalid_run = 0
        self._probe_leases = []
        self._probe_successes = 0

    def _live_probes(self, now: float) -> int:
        leases = self._probe_leases
        if not leases:
            return 0
        lease_s = self.config.probe_lease_s
        return sum(1 for started in leases if now - started < lease_s)


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


class HealthRegistry:
    """Target name -> TargetHealth for this process: created on first use, bounded (least recently used).

    Call ``retain`` after every routing table swap, so the bound (far above any real configuration) is
    only a safety net: a dropped target that a candidate still holds would stop seeing new outcomes.
    """

    __slots__ = ("_config", "_targets", "_max_targets")

    def __init__(self, config: HealthConfig | None = None, *, max_targets: int = 4096) -> None:
        if max_targets < 1:
            raise ValueError("max_targets must be >= 1")
        self._config = config or HealthConfig()
        self._targets: OrderedDict[str, TargetHealth] = OrderedDict()
        self._max_targets = max_targets

    @property
    def config(self) -> HealthConfig:
        return self._config

    def get(self, name: str) -> TargetHealth:
        """The target's health, created healthy on first use."""
        health = self._targets.get(name)
        if health is None:
            health = TargetHealth(name, self._config)
            self._targets[name] = health
            if len(self._targets) > self._max_targets:
                self._targets.popitem(last=False)
        else:
            self._targets.move_to_end(name)
        return health

    def peek(self, name: str) -> TargetHealth | None:
        """The target's health if it exists; never creates or reorders."""
        return self._targets.get(name)

    def configure(self, config: HealthConfig) -> None:
        """Apply new rules (a settings change) to every known target; their state is kept."""
        self._config = config
        for health in self._targets.values():
            health.config = config

    def retain(self, names: Iterable[str]) -> None:
        """Forget targets that are no longer configured (after a routing table swap)."""
        keep = set(names)
        for name in [n for n in self._targets if n not in keep]:
            del self._targets[name]

    def reset(self) -> None:
        """Forget what every known target has learned (the admin's reset action).

        The objects are reset in place, not dropped: candidates built from this registry keep reading the
        very objects the attempts record into.
        """
        for health in self._targets.values():
            health.reset()

    def snapshot(self, now: float) -> tuple[TargetStateView, ...]:
        """Frozen views of every known target, by name."""
        return tuple(self._targets[name].snapshot(now) for name in sorted(self._targets))

    def __len__(self) -> int:
        return len(self._targets)

    def __contains__(self, name: object) -> bool:
        return name in self._targets
