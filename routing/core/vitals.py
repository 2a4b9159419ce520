"""The read side of a target's health: the status words, the ``Vitals`` tuple and the frozen ``TargetStateView``.

The selector ranks over anything that ``HasVitals``: the live ``TargetHealth`` (``routing.core.health``) or a
``TargetStateView`` frozen from it (the admin page, the audit event, the explain endpoint).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal, NamedTuple, Protocol

Status = Literal["healthy", "cooling", "probing"]

HEALTHY: Status = "healthy"
COOLING: Status = "cooling"
PROBING: Status = "probing"


class Vitals(NamedTuple):
    """What the selector reads of a target whose breaker is open (the healthy case never builds one)."""

    status: Status
    latency_estimate_s: float | None  # None when never measured
    in_flight: int
    cooldown_until: float | None
    available: bool


class HasVitals(Protocol):
    """What the selector reads of a target's health: ``TargetHealth`` (live) or ``TargetStateView`` (frozen).

    ``cooldown_until is None`` means closed, healthy and available: the common case is four attribute
    reads; ``vitals`` is called only for a target whose breaker is open. ``observations`` counts the latency
    samples behind the estimate (the adaptive selector's cold-start bonus reads it).
    """

    @property
    def cooldown_until(self) -> float | None: ...

    @property
    def latency_estimate_s(self) -> float | None: ...

    @property
    def in_flight(self) -> int: ...

    @property
    def observations(self) -> int: ...

    def vitals(self, now: float) -> Vitals: ...


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
    observations: int = 0  # latency samples fed so far (the cold-start bonus counts them)
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
        return Vitals(self.status, self.latency_estimate_s, self.in_flight, self.cooldown_until, self.available)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready fields, for the audit event."""
        return asdict(self)
