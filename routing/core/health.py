"""TargetHealth: the one model of a target's health, read by the adaptive selector and the fallback policy.

Each concrete target (a provider model) has one ``TargetHealth`` per process. It holds

- a peak-EWMA latency estimate (time to first byte for streams), fed by every attempt (``latency``);
- the number of attempts in flight;
- one circuit breaker, which *is* the cooldown: there is no second notion of "suppressed".

The breaker is a single state machine; the error class and reason of a failure only decide how fast it trips::

      success (resets the runs)
         ┌───┐
         v   │     429, a confirmed 401/403/404: at once
      ┌─────────┐  3 transient in a row           ┌─────────┐
      │ healthy │ ──────────────────────────────> │ cooling │  open: every attempt refused
      └─────────┘  5 malformed answers in a row  └─────────┘
           ^                                           │    ^
           │  successes_to_close probe successes       │    │  a failed probe re-opens with
           │  (the doubling resets)     cooldown_until │    │  the next (doubled) cooldown
           │                                  reached  v    │
           │                                      ┌─────────┐
           └───────────────────────────────────── │ probing │  half-open: at most
                                                  └─────────┘  half_open_probes at a time

Cooldown length: ``min(cooldown_max, cooldown_base * 2 ** level)`` where ``level`` counts trips since the
breaker last closed; a confirmed 401/403/404 (auth, not found, quota) takes ``cooldown_max`` at once; a longer
Retry-After wins, up to ``cooldown_max``. Only outcomes that ``punishes_target`` touch the state: never the
client's own mistakes (PERMANENT), a request this target cannot serve (INCOMPATIBLE context overflow,
unsupported parameter), nor a failure the request itself caused (``client_caused``: a timeout at the client's
own deadline, an answer refused for what the request asked of it). A live attempt's 401/403/404 reaches
``record`` only once it is confirmed (``routing.core.lockouts``); a confirming probe's goes to
``record_lockout``.

Time is a parameter (``now``, seconds on one clock; the wall clock keeps ``cooldown_until`` displayable).
Not thread-safe: one event loop owns a registry.

The rules live in ``health_config`` (HealthConfig), the failure classification in ``cooldown``, the read
side (status words, Vitals, TargetStateView) in ``vitals``; every name stays importable from here.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Literal

from routing.core.cooldown import (
    KIND_RANK,
    LOCKOUT_STATUSES,
    RATE_LIMIT_STATUSES,
    BreakerClosed,
    CooldownStarted,
    FailureKind,
    HealthChange,
    Trigger,
    failure_kind,
    reason_kind,
)
from routing.core.health_config import HealthConfig
from routing.core.latency import PeakEwmaLatency
from routing.core.outcome import AttemptOutcome
from routing.core.vitals import COOLING, HEALTHY, PROBING, Status, TargetStateView, Vitals

__all__ = [
    "COOLING",
    "HEALTHY",
    "LOCKOUT_STATUSES",
    "PROBING",
    "RATE_LIMIT_STATUSES",
    "Admission",
    "BreakerClosed",
    "CooldownStarted",
    "FailureKind",
    "HealthChange",
    "HealthConfig",
    "HealthListener",
    "HealthRegistry",
    "Status",
    "TargetHealth",
    "TargetStateView",
    "Trigger",
    "Vitals",
    "failure_kind",
    "reason_kind",
]

Admission = Literal["attempt", "probe", "refused"]
HealthListener = Callable[[HealthChange], None]


class TargetHealth(PeakEwmaLatency):
    """The health of one target in this process. Mutable; every method takes ``now``.

    The engine's side of the contract, per attempt: ``begin`` (refused while cooling or when no probe slot is
    free), ``record`` with the outcome (at the first byte for a stream), ``end`` when the attempt is over.

    Other processes' verdicts arrive through ``adopt_cooldown`` and ``adopt_close`` (the shared health store);
    ``listener``, when set, hears this process's own: every cooldown started or extended by an explicit
    verdict, and every close by a probe. It is called synchronously, so it must only hand the change on.
    """

    __slots__ = (
        "name",
        "config",
        "in_flight",
        "cooldown_until",
        "cooldown_level",
        "consecutive_failures",
        "last_error_reason",
        "_transient_run",
        "_invalid_run",
        "_probe_leases",
        "_probe_successes",
        "listener",
        "opened_at",
        "shared_origin",
        "open_kind",
    )

    def __init__(self, name: str, config: HealthConfig | None = None, listener: HealthListener | None = None) -> None:
        self.name = name
        self.config = config or HealthConfig()
        self.listener = listener
        self.reset()

    def reset(self) -> None:
        """Forget everything learned: healthy, unmeasured, nothing in flight. The object stays the same."""
        self.latency_estimate_s: float | None = None  # None until the first sample
        self.last_sample_at: float | None = None
        self.observations = 0  # latency samples since added or reset: fewer than N earn the cold-start bonus
        self.in_flight = 0
        self.cooldown_until: float | None = None  # None: breaker closed
        self.cooldown_level = 0  # trips since the breaker last closed; drives the doubling
        self.consecutive_failures = 0  # health-affecting failures since the last success
        self.last_error_reason: str | None = None
        self._transient_run = 0
        self._invalid_run = 0
        self._probe_leases: list[float] = []  # when each outstanding half-open probe started
        self._probe_successes = 0
        self.opened_at: float | None = None  # the latest failure verdict behind the open breaker (own or adopted)
        self.shared_origin: str | None = None  # the process whose verdict the open breaker follows; None: own
        # The strongest failure kind behind the open breaker (rate_limited > lockout > transient > invalid):
        # the background prober reads it, so a breaker a 429 touched is never probed. None: closed or unknown.
        self.open_kind: FailureKind | None = None

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
            return Vitals(HEALTHY, self.latency_estimate_s, self.in_flight, None, True)
        if now < until:
            return Vitals(COOLING, self.latency_estimate_s, self.in_flight, until, False)
        free = self._live_probes(now) < self.config.half_open_probes
        return Vitals(PROBING, self.latency_estimate_s, self.in_flight, until, free)

    def snapshot(self, now: float) -> TargetStateView:
        """A frozen copy of this target's state at ``now``."""
        return TargetStateView(
            name=self.name,
            status=self.status(now),
            available=self.available(now),
            latency_estimate_s=self.latency_estimate_s,
            observations=self.observations,
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

    def adopt_cooldown(self, until: float, now: float, *, reason: str = "shared", origin: str | None = None) -> bool:
        """Open the breaker until ``until`` because another process did (shared cooldown store); True if adopted.

        Never shortens a cooldown this process already has: the later end wins. ``origin`` names the process
        whose verdict this is (shown by the admin). The listener is not told: the change is not this process's.
        """
        kind = reason_kind(reason)
        if until <= now:
            return False
        if self.cooldown_until is not None and until <= self.cooldown_until:
            if now < self.cooldown_until:
                self._raise_kind(kind)  # a shorter 429 elsewhere still keeps the prober off this breaker
            return False
        if self.cooldown_until is None or now >= self.cooldown_until:
            self.open_kind = None
        if self.cooldown_until is None:
            self.cooldown_level += 1
        self.cooldown_until = until
        self.last_error_reason = reason
        self.opened_at = now
        self.shared_origin = origin
        self._raise_kind(kind)
        self._open_reset()
        return True

    def adopt_close(self, probe_started: float, now: float) -> bool:
        """Close the breaker because another process's half-open probe succeeded; True if it closed.

        Only when that is safe: this breaker's own cooldown is over (it is probing, so nothing is shortened)
        and the probe started after the latest failure verdict this process holds (``opened_at``); a newer
        failure here outweighs an older success elsewhere.
        """
        until = self.cooldown_until
        if until is None or now < until:
            return False
        if self.opened_at is not None and probe_started < self.opened_at:
            return False
        self._close()
        return True

    # -- background probes (routing.core.probes decides; routing.gateway.background.prober sends) ---------------------

    def close_by_probe(self, probe_started: float, now: float) -> bool:
        """End the cooldown early because a background probe that started at ``probe_started`` passed.

        Refused (False) when the breaker is not cooling any more, when a 429 holds it (its Retry-After is never
        shortened), when it opened for a reason a probe does not prove (invalid answers), or when a failure
        verdict newer than the probe's start arrived meanwhile. The listener hears a ``BreakerClosed(early)``.
        """
        if not self._probe_may_close(probe_started, now):
            return False
        self._close()
        if self.listener is not None:
            self.listener(BreakerClosed(self.name, probe_started, early=True))
        return True

    def adopt_probe_close(self, probe_started: float, now: float) -> bool:
        """Another process's background probe passed: close here on the same terms (not told to the listener)."""
        if not self._probe_may_close(probe_started, now):
            return False
        self._close()
        return True

    def record_probe_failure(self, outcome: AttemptOutcome, now: float) -> None:
        """A background probe failed: a lockout (the current key is still refused) or a 429 holds the breaker
        open longer, as the same verdict from live traffic would; a transient failure changes nothing (the
        cooldown runs its course, and the doubling is for live attempts). Latency is not fed: a probe is not
        the kind of call the estimate is about."""
        kind = failure_kind(outcome)
        if kind is None or self.status(now) != COOLING:
            return
        self.last_error_reason = outcome.reason
        self._extend(kind, outcome, now)

    def record_lockout(self, outcome: AttemptOutcome, now: float) -> CooldownStarted | None:
        """A lockout confirmed with the gateway's own credentials (``routing.core.lockouts``): lock the target out
        for every key, as a live attempt's lockout would, or extend the cooldown it is in. Latency is not fed: the
        confirming call is a probe. Any other outcome changes nothing."""
        kind = failure_kind(outcome)
        if kind != "lockout":
            return None
        self.last_error_reason = outcome.reason
        if self.status(now) == COOLING:
            self._extend(kind, outcome, now)
            return None
        return self._trip("lockout", kind, outcome, now)

    def _probe_may_close(self, probe_started: float, now: float) -> bool:
        until = self.cooldown_until
        if until is None or self.open_kind not in ("transient", "lockout"):
            return False
        # A failure verdict newer than the probe's start outweighs it (it may have come from the fixed state's
        # successor, or from another process after the probe left).
        return self.opened_at is None or probe_started >= self.opened_at

    def _raise_kind(self, kind: FailureKind | None) -> None:
        if kind is not None and (self.open_kind is None or KIND_RANK[kind] > KIND_RANK[self.open_kind]):
            self.open_kind = kind

    def _record_success(self, latency_s: float, now: float) -> None:
        self.observe_latency(latency_s, now)
        self.consecutive_failures = 0
        self._transient_run = 0
        self._invalid_run = 0
        if self.status(now) != PROBING:
            return  # healthy: nothing to reset; cooling: a straggler from before the trip proves nothing
        self._probe_successes += 1
        if self._probe_successes >= self.config.successes_to_close:
            probe_started = min(self._probe_leases, default=now)
            self._close()
            if self.listener is not None:
                self.listener(BreakerClosed(self.name, probe_started))

    def _close(self) -> None:
        self.cooldown_until = None
        self.cooldown_level = 0
        self._probe_leases = []
        self._probe_successes = 0
        self.opened_at = None
        self.shared_origin = None
        self.open_kind = None

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
        self.opened_at = now
        self.shared_origin = None
        self.open_kind = kind  # a new open period: the failure that tripped it decides
        self._open_reset()
        started = CooldownStarted(
            target=self.name,
            trigger=trigger,
            reason=outcome.reason,
            duration_s=duration,
            until=self.cooldown_until,
            level=self.cooldown_level,
        )
        if self.listener is not None:
            self.listener(started)
        return started

    def _extend(self, kind: FailureKind, outcome: AttemptOutcome, now: float) -> None:
        # The doubling level is not advanced: this failure belongs to the burst that already tripped it.
        # Only an explicit verdict (a lockout, a Retry-After) says the cooldown must last longer.
        if kind in ("rate_limited", "lockout"):
            self._raise_kind(kind)  # even when it does not extend: the prober must leave a 429's breaker alone
        if kind == "lockout":
            until = now + self.config.cooldown_max_s
        elif outcome.retry_after_s is not None:
            until = now + min(outcome.retry_after_s, self.config.cooldown_max_s)
        else:
            return
        if self.cooldown_until is not None and until > self.cooldown_until:
            self.cooldown_until = until
            self.opened_at = now
            self.shared_origin = None
            if self.listener is not None:
                self.listener(CooldownStarted(
                    target=self.name,
                    trigger="lockout" if kind == "lockout" else "rate_limited",
                    reason=outcome.reason,
                    duration_s=until - now,
                    until=until,
                    level=self.cooldown_level,
                ))

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


class HealthRegistry:
    """Target name -> TargetHealth for this process: created on first use, bounded (least recently used).

    Call ``retain`` after every routing table swap, so the bound (far above any real configuration) is
    only a safety net: a dropped target that a candidate still holds would stop seeing new outcomes.
    """

    __slots__ = ("_config", "_targets", "_max_targets", "_listener")

    def __init__(self, config: HealthConfig | None = None, *, max_targets: int = 4096) -> None:
        if max_targets < 1:
            raise ValueError("max_targets must be >= 1")
        self._config = config or HealthConfig()
        self._targets: OrderedDict[str, TargetHealth] = OrderedDict()
        self._max_targets = max_targets
        self._listener: HealthListener | None = None

    def listen(self, listener: HealthListener | None) -> None:
        """Tell ``listener`` every target's own health changes (see ``TargetHealth.listener``), or stop."""
        self._listener = listener
        for health in self._targets.values():
            health.listener = listener

    @property
    def config(self) -> HealthConfig:
        return self._config

    def get(self, name: str) -> TargetHealth:
        """The target's health, created healthy on first use."""
        health = self._targets.get(name)
        if health is None:
            health = TargetHealth(name, self._config, self._listener)
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
