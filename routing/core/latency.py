"""The peak-EWMA latency estimate of a target (time to first byte for streams), fed by every attempt.

A mixin of ``routing.core.health.TargetHealth`` rather than a separate object or function: ``record`` feeds it
on every attempt, and a base class's methods and slots cost no extra call or attribute hop.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from routing.core.health_config import HealthConfig


class PeakEwmaLatency:
    """Latency estimate state (``latency_estimate_s``, ``last_sample_at``, ``observations``) and its rules."""

    __slots__ = ("latency_estimate_s", "last_sample_at", "observations")

    latency_estimate_s: float | None  # None until the first sample
    last_sample_at: float | None
    # Samples fed since the target was added (or reset): answers and penalised failures alike. The adaptive
    # selector gives a target with fewer than PRO_ROUTING_COLD_START_OBSERVATIONS the cold-start bonus.
    observations: int
    config: HealthConfig  # a slot of the class that mixes this in

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
        self.observations += 1

    def _penalised(self, observed_s: float) -> float:
        # A failure counts as at least a multiple of the estimate (and a floor), so a target that fails fast
        # never looks fast; capped, but a longer observed time still counts.
        config = self.config
        estimate = self.latency_estimate_s or 0.0
        penalty = min(
            config.failure_latency_cap_s,
            max(estimate * config.failure_latency_factor, config.failure_latency_floor_s),
        )
        return max(observed_s, penalty)
