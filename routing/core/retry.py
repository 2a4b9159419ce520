"""Bounded retries: what to do after a failed attempt, the backoff, and the gateway-wide retry budget.

The rule: retry only when the failure is plausibly transient, fall back only when another route can still
meet the contract, and stop when the deadline or the budget says so. By default a request makes at most
three attempts: the primary, one same-route retry for an early connection failure (nothing can have been
billed), and one fallback.

``RetryPolicy.next_action`` is pure apart from the retry budget it may spend from; time and randomness
are parameters.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Literal

from routing.core.outcome import EARLY_FAILURE_REASONS, AttemptOutcome, ErrorClass

ActionKind = Literal["retry_same", "fallback", "give_up", "return_to_client"]


@dataclass(frozen=True, slots=True)
class Action:
    """The next step after a failed attempt.

    ``retry_same``: wait ``delay_s`` then try the same target again; ``fallback``: try the next eligible
    target now; ``return_to_client``: the client's own mistake, relay it; ``give_up``: answer with the
    last failure (``client_status``). ``reason`` is a bounded word for metrics and audit: the outcome's
    reason for the first three, why the gateway stopped for ``give_up``.
    """

    kind: ActionKind
    delay_s: float = 0.0
    reason: str = ""


# Why a request stopped trying (Action.reason for give_up).
STOP_STREAM_STARTED = "stream_started"  # bytes reached the client: nothing can be replaced any more
STOP_AMBIGUOUS = "ambiguous"  # the attempt may have been executed: never replayed blindly
STOP_MAX_ATTEMPTS = "max_attempts"
STOP_MAX_FALLBACKS = "max_fallbacks"
STOP_NO_FALLBACK = "no_fallback"  # no untried target meets the contract
STOP_DEADLINE = "deadline"  # the next attempt could not finish in time
STOP_RETRY_AFTER = "retry_after_exceeds_deadline"  # the provider asked for a wait longer than we have
STOP_RETRY_BUDGET = "retry_budget"  # the gateway-wide budget is spent: an outage, not a blip


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How many attempts a request may make and which failures earn which kind of retry.

    ``retry_same_reasons``: the TRANSIENT reasons retried on the same target (default: connection
    failures only). Adding ``rate_limited`` or ``overloaded`` makes the gateway honour a provider's
    Retry-After instead of falling back. ``replay_ambiguous``: let an AMBIGUOUS failure fall back to
    another target; only for workloads without side effects, since the first attempt may have run.
    """

    max_attempts_total: int = 3
    max_fallbacks: int = 1
    same_route_retries: int = 1
    backoff_base_s: float = 0.2
    backoff_cap_s: float = 2.0
    retry_same_reasons: frozenset[str] = field(default_factory=lambda: EARLY_FAILURE_REASONS)
    replay_ambiguous: bool = False

    def __post_init__(self) -> None:
        if self.max_attempts_total < 1:
            raise ValueError("max_attempts_total must be at least 1")
        if self.max_fallbacks < 0 or self.same_route_retries < 0:
            raise ValueError("max_fallbacks and same_route_retries must not be negative")
        if not (0 <= self.backoff_base_s <= self.backoff_cap_s) or not math.isfinite(self.backoff_cap_s):
            raise ValueError("backoff needs 0 <= backoff_base_s <= backoff_cap_s < inf")

    def backoff_s(self, retry_index: int, rng: random.Random) -> float:
        """Full-jitter backoff before same-route retry number ``retry_index`` (0 for the first).

        ``uniform(0, min(cap, base * 2**n))``: spreads retries from many requests instead of
        synchronising them into the next wave.
        """
        ceiling = min(self.backoff_cap_s, self.backoff_base_s * 2.0 ** min(max(retry_index, 0), 62))
        return rng.uniform(0.0, ceiling)

    def next_action(
        self,
        outcome: AttemptOutcome,
        *,
        attempt_no: int,
        same_route_retries: int,
        fallbacks: int,
        stream_started: bool,
        remaining_s: float,
        fallback_available: bool,
        rng: random.Random,
        launch_allowance_s: float = 0.0,
        budget: RetryBudget | None = None,
        now: float = 0.0,
    ) -> Action:
        """What to do after ``outcome`` failed.

        ``attempt_no``: attempts made so far, this one included (1 after the primary).
        ``same_route_retries``: retries already made on the target that produced ``outcome``.
        ``fallbacks``: fallbacks already made in this request. ``stream_started``: a byte of this
        response already reached the client. ``remaining_s``: time left before the deadline.
        ``launch_allowance_s``: what the next attempt needs (``AttemptAllowance.total``).
        ``fallback_available``: an untried target passes the contract filter. A retry or fallback
        spends one unit of ``budget`` (checked last, so a refused step costs nothing).
        """
        if outcome.ok or outcome.error_class is None:
            raise ValueError("next_action is for failed attempts")
        error_class = outcome.error_class
        if stream_started:
            return Action("give_up", reason=STOP_STREAM_STARTED)
        if error_class is ErrorClass.PERMANENT:
            return Action("return_to_client", reason=outcome.reason)
        if error_class is ErrorClass.AMBIGUOUS and not self.replay_ambiguous:
            return Action("give_up", reason=STOP_AMBIGUOUS)
        if attempt_no >= self.max_attempts_total:
            return Action("give_up", reason=STOP_MAX_ATTEMPTS)

        blocked: str | None = None
        if (
            error_class is ErrorClass.TRANSIENT
            and outcome.reason in self.retry_same_reasons
            and same_route_retries < self.same_route_retries
        ):
            slack = remaining_s - launch_allowance_s
            if outcome.retry_after_s is not None:
                # The provider's word wins over our backoff, but only if waiting still leaves time to work.
                if outcome.retry_after_s <= slack:
                    wait = Action("retry_same", outcome.retry_after_s, outcome.reason)
                    return self._spend(wait, budget, now)
                blocked = STOP_RETRY_AFTER
            elif slack >= 0 and remaining_s > 0:
                delay = min(self.backoff_s(same_route_retries, rng), slack)
                return self._spend(Action("retry_same", delay, outcome.reason), budget, now)
            else:
                blocked = STOP_DEADLINE

        # Every class that reaches here may fall back: TRANSIENT, INCOMPATIBLE, INVALID_RESPONSE, and
        # AMBIGUOUS when the policy allows replaying it.
        if fallbacks >= self.max_fallbacks:
            return Action("give_up", reason=blocked or STOP_MAX_FALLBACKS)
        if not fallback_available:
            return Action("give_up", reason=blocked or STOP_NO_FALLBACK)
        if remaining_s <= 0 or launch_allowance_s > remaining_s:
            return Action("give_up", reason=STOP_DEADLINE)
        return self._spend(Action("fallback", 0.0, outcome.reason), budget, now)

    @staticmethod
    def _spend(action: Action, budget: RetryBudget | None, now: float) -> Action:
        if budget is not None and not budget.try_spend(now):
            return Action("give_up", reason=STOP_RETRY_BUDGET)
        return action


def client_status(outcome: AttemptOutcome, *, deadline_exhausted: bool = False) -> int:
    """The HTTP status to answer the client with when the last attempt failed and the gateway stopped.

    The client's own mistakes keep the upstream 4xx; a request no configured target can serve (too long,
    unsupported parameter) is 400; the gateway's broken upstream configuration is 502; an upstream
    that is busy is 503 (with Retry-After); running out of time is 504.
    """
    if deadline_exhausted:
        return 504
    error_class = outcome.error_class
    if error_class is ErrorClass.PERMANENT:
        status = outcome.status
        return status if status is not None and 400 <= status < 500 and status not in (401, 403) else 400
    if error_class is ErrorClass.INCOMPATIBLE:
        return 400 if outcome.reason in ("context_overflow", "unsupported") else 502
    if error_class is ErrorClass.TRANSIENT:
        if outcome.reason in ("rate_limited", "overloaded"):
            return 503
        return 504 if outcome.reason == "timeout" else 502
    if error_class is ErrorClass.AMBIGUOUS:
        return 504 if outcome.reason == "timeout" else 502
    return 502


@dataclass(frozen=True, slots=True)
class BudgetSnapshot:
    requests: int
    retries: int
    allowed: float  # retries the window allows right now: max(floor, ratio * requests)


class RetryBudget:
    """Gateway-wide cap on retries and fallbacks: at most ``ratio`` of requests over a sliding window.

    With every target failing, each request would otherwise multiply the load on the failing providers;
    the budget turns that into at most ``1 + ratio`` attempts per request (plus ``min_per_window`` spare
    retries so a quiet gateway can still retry a blip). The window is ``buckets`` fixed slices of
    ``window_s / buckets`` seconds each, so memory is constant and each call is O(1) amortised; the
    window's age is accurate to one slice. One instance per process; not shared between threads.
    """

    __slots__ = (
        "_ratio",
        "_floor",
        "_width",
        "_buckets",
        "_requests",
        "_retries",
        "_head",
        "_total_req",
        "_total_ret",
    )

    def __init__(
        self,
        *,
        ratio: float = 0.2,
        window_s: float = 10.0,
        min_per_window: int = 10,
        buckets: int = 10,
    ) -> None:
        if not (ratio >= 0.0) or window_s <= 0 or min_per_window < 0 or buckets < 1:
            raise ValueError("RetryBudget needs ratio >= 0, window_s > 0, min_per_window >= 0, buckets >= 1")
        self._ratio = ratio
        self._floor = min_per_window
        self._width = window_s / buckets
        self._buckets = buckets
        self._requests = [0] * buckets
        self._retries = [0] * buckets
        self._head: int | None = None  # index of the newest slice, counted from time 0
        self._total_req = 0
        self._total_ret = 0

    def record_request(self, now: float) -> None:
        """Count one incoming request (call once per request, before its first attempt)."""
        slot = self._advance(now)
        self._requests[slot] += 1
        self._total_req += 1

    def try_spend(self, now: float) -> bool:
        """Take one retry from the budget; False (and nothing taken) when the window has none left."""
        slot = self._advance(now)
        if self._total_ret + 1 > self._allowed():
            return False
        self._retries[slot] += 1
        self._total_ret += 1
        return True

    def snapshot(self, now: float) -> BudgetSnapshot:
        self._advance(now)
        return BudgetSnapshot(self._total_req, self._total_ret, self._allowed())

    def _allowed(self) -> float:
        return max(float(self._floor), self._ratio * self._total_req)

    def _advance(self, now: float) -> int:
        index = math.floor(now / self._width)
        if self._head is None:
            self._head = index
        elif index > self._head:
            expired = min(index - self._head, self._buckets)
            for step in range(1, expired + 1):
                slot = (self._head + step) % self._buckets
                self._total_req -= self._requests[slot]
                self._total_ret -= self._retries[slot]
                self._requests[slot] = 0
                self._retries[slot] = 0
            self._head = index
        # A clock that steps back (it should not: use a monotonic one) counts in the newest slice.
        return self._head % self._buckets
