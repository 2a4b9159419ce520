"""HealthConfig: the rules of the health model (breaker thresholds, cooldown lengths, latency estimate).

Cooldown length: ``min(cooldown_max, cooldown_base * 2 ** level)`` where ``level`` counts trips since the
breaker last closed (``cooldown_for``); see ``routing.core.health`` for the breaker that applies it.
"""

from __future__ import annotations

from dataclasses import dataclass

from routing.core.table import SettingsInForce


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
    def from_settings(settings: SettingsInForce) -> HealthConfig:
        """The config for the PRO_ROUTING_COOLDOWN_BASE / _MAX values in force."""
        return HealthConfig(cooldown_base_s=settings.cooldown_base_s, cooldown_max_s=settings.cooldown_max_s)

    def cooldown_for(self, level: int) -> float:
        """Cooldown for trip ``level`` (from 0) since the breaker last closed: base, doubled, capped."""
        if level >= 64:  # far past any cap; keeps the shift small
            return self.cooldown_max_s
        return min(self.cooldown_max_s, self.cooldown_base_s * (1 << level))
