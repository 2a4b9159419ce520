"""One absolute deadline per request, and the time an attempt needs before it is worth launching.

The deadline is taken once, at entry, and every attempt, backoff and validation lives inside it: three
attempts with a five-second timeout each must not turn a five-second budget into fifteen. Before each
attempt the engine asks ``can_launch``; the attempt's timeout is what remains.

Times are seconds on one monotonic clock chosen by the caller (``time.monotonic()`` in the gateway).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DEADLINE_HEADER = "X-GoModel-Deadline-Ms"
MAX_DEADLINE_MS = 3_600_000  # an hour: longer values are clamped, not refused
MIN_DEADLINE_MS = 100  # less cannot cover even one round trip: refused, so the client hears why


class DeadlineHeaderError(ValueError):
    """The client's X-GoModel-Deadline-Ms is not a positive whole number of milliseconds (answer 400)."""


def deadline_ms(
    *,
    header: str | None,
    contract_ms: int | None,
    default_ms: int,
    max_ms: int = MAX_DEADLINE_MS,
) -> int:
    """The request's budget in milliseconds: the tighter of the header and the contract, else the default.

    A client may ask for less time than its workload's contract allows, never for more: the contract is
    the operator's promise to everyone behind that workload. Raises DeadlineHeaderError for a malformed
    header so the caller answers 400 instead of guessing.
    """
    chosen: list[int] = []
    if header is not None:
        text = header.strip()
        digits = text.lstrip("0")
        if not (text.isascii() and text.isdigit()) or not digits:
            raise DeadlineHeaderError(
                f"{DEADLINE_HEADER} must be a positive whole number of milliseconds, got {header[:40]!r}"
            )
        # A 40-digit value is just "very long": clamp it below instead of parsing a huge integer.
        value = int(digits) if len(digits) <= 15 else max_ms
        if value < MIN_DEADLINE_MS:
            raise DeadlineHeaderError(f"{DEADLINE_HEADER} must be at least {MIN_DEADLINE_MS} ms, got {value}")
        chosen.append(value)
    if contract_ms is not None and contract_ms > 0:
        chosen.append(contract_ms)
    budget = min(chosen) if chosen else default_ms
    return max(1, min(budget, max_ms))


@dataclass(frozen=True, slots=True)
class AttemptAllowance:
    """The time one attempt needs: connect, generate and validate. Its ``total`` gates a launch.

    ``generation_s`` comes from the target's measured latency (the health model's estimate); a target
    nobody has measured yet gets ``cold_start_s`` so it is neither refused outright nor assumed instant.
    """

    connect_s: float
    generation_s: float
    validation_s: float

    @property
    def total(self) -> float:
        return self.connect_s + self.generation_s + self.validation_s

    @staticmethod
    def for_target(
        expected_latency_s: float | None,
        *,
        connect_s: float = 0.1,
        validation_s: float = 0.05,
        cold_start_s: float = 1.0,
    ) -> AttemptAllowance:
        """The allowance for a target whose measured latency is ``expected_latency_s`` (None: unmeasured)."""
        if expected_latency_s is None or not math.isfinite(expected_latency_s) or expected_latency_s < 0:
            generation = cold_start_s
        else:
            generation = expected_latency_s
        return AttemptAllowance(connect_s=connect_s, generation_s=generation, validation_s=validation_s)


@dataclass(frozen=True, slots=True)
class Deadline:
    """An absolute point in time (``at``, on the caller's monotonic clock) by which the answer is due."""

    at: float

    @staticmethod
    def start(
        now: float,
        *,
        header: str | None = None,
        contract_ms: int | None = None,
        default_ms: int,
        max_ms: int = MAX_DEADLINE_MS,
    ) -> Deadline:
        """The deadline of a request entering at ``now``; see ``deadline_ms`` for which budget wins."""
        budget = deadline_ms(header=header, contract_ms=contract_ms, default_ms=default_ms, max_ms=max_ms)
        return Deadline(at=now + budget / 1000.0)

    def remaining(self, now: float) -> float:
        """Seconds left, never negative."""
        return max(0.0, self.at - now)

    def expired(self, now: float) -> bool:
        return now >= self.at

    def can_launch(self, now: float, allowance: AttemptAllowance | float) -> bool:
        """True when an attempt needing ``allowance`` (seconds, or an AttemptAllowance) can still finish."""
        needed = allowance.total if isinstance(allowance, AttemptAllowance) else allowance
        remaining = self.remaining(now)
        return remaining > 0 and remaining >= needed

    def attempt_timeout(self, now: float) -> float:
        """The timeout to give the next attempt: everything that remains (the deadline is the only clock)."""
        return self.remaining(now)
