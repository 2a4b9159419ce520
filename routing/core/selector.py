"""Target selection for virtual models: pure strategies over an immutable tuple of candidates.

A virtual model's candidates are built once per routing table (each ``Candidate`` holds the live
``TargetHealth`` of its target, as Finagle's balancer holds its nodes), and ``select`` runs per request
with the clock, the random generator and, for ``round_robin``, the virtual model's ``RoundRobinState``.
It returns a ``Selection``: the winner, then the failover chain the engine walks on retryable errors.

Strategies::

    round_robin   smooth weighted round robin (nginx): weights 5,1,1 give a a b a c a a
    weighted      random, in proportion to weight
    failover      declaration order
    cost          cheapest input+output price first; unpriced targets only after every priced one
    adaptive      power of two choices over per-request weights (latency, price, warm cache, floor);
                  the less loaded of the two wins. round_robin when adaptive routing is disabled.
                  A share of picks (``exploration``) is instead a uniform draw among the healthy targets,
                  and a target with few latency samples counts as the fastest (cold start).

Rules shared by every strategy: targets in cooldown (and half-open targets whose probe slots are taken) are
skipped and listed in ``skipped``; when none is left the selection is empty and carries
``all_cooling_retry_after_s`` (the gateway answers 503 with Retry-After); a session's pinned target is kept
while it is available and released only when it is not; a single available target is returned at once.

The code favours flat loops over index-aligned lists: an adaptive pick over 8 targets must stay within
10 microseconds (``bench/micro_selector.py``).

``Candidate`` lives in ``candidate``, ``SelectorConfig`` and the adaptive weights and pick in ``adaptive``,
``HasVitals`` in ``vitals``; every name stays importable from here.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from itertools import accumulate
from typing import Literal

from routing.core.adaptive import (
    MIN_LATENCY_S,
    PRICE_EXPONENT,
    SelectorConfig,
    _index_at,
    adaptive_pick,
    adaptive_weights,
)
from routing.core.candidate import MIN_PRICE, Candidate
from routing.core.table import STRATEGIES
from routing.core.vitals import COOLING, HasVitals

__all__ = [
    "FAILOVER_RANKING",
    "MIN_LATENCY_S",
    "MIN_PRICE",
    "MIN_RETRY_AFTER_S",
    "PRICE_EXPONENT",
    "Affinity",
    "Candidate",
    "HasVitals",
    "RankBy",
    "RoundRobinState",
    "Selection",
    "SelectorConfig",
    "adaptive_weights",
    "available_weights",
    "select",
]

Affinity = Literal["honored", "released"]
RankBy = Literal["weight", "declared", "price"]  # how a Selection orders the failover chain
FAILOVER_RANKING: Mapping[str, RankBy] = {"failover": "declared", "cost": "price"}  # the others: by weight

MIN_RETRY_AFTER_S = 1.0  # Retry-After is whole seconds; a half-open target busy probing recovers soon


class RoundRobinState:
    """Smooth weighted round robin's running values for one virtual model; keep one per virtual model."""

    __slots__ = ("current",)

    def __init__(self) -> None:
        self.current: dict[str, float] = {}


class Selection:
    """The outcome of one selection. Read-only by convention (a plain slotted class: it is built per request).

    ``winner`` is the target to try first and ``order`` the winner followed by the failover chain (available
    targets only); both are empty when nothing is available, and then ``all_cooling_retry_after_s`` says when
    the earliest target recovers. ``weights`` are the weights the strategy used, relative to the heaviest
    (adaptive: computed for this request). ``affinity`` is None when no session target was given.
    ``explored`` is True when the winner is the exploration share's uniform draw, not the strategy's pick.
    """

    __slots__ = (
        "strategy",
        "winner",
        "why",
        "skipped",
        "affinity",
        "all_cooling_retry_after_s",
        "explored",
        "_candidates",
        "_weights",
        "_rank_by",
        "_order",
    )

    def __init__(
        self,
        strategy: str,
        winner: str | None,
        why: str,
        candidates: Sequence[Candidate] = (),
        weights: Sequence[float] = (),
        rank_by: RankBy = "weight",
        skipped: tuple[tuple[str, str], ...] = (),
        affinity: Affinity | None = None,
        all_cooling_retry_after_s: float | None = None,
        *,
        explored: bool = False,
    ) -> None:
        self.strategy = strategy
        self.winner = winner
        self.why = why
        self.skipped = skipped
        self.affinity = affinity
        self.all_cooling_retry_after_s = all_cooling_retry_after_s
        self.explored = explored
        self._candidates = candidates
        self._weights = weights  # aligned with candidates; 0 for a skipped target
        self._rank_by = rank_by
        self._order: tuple[str, ...] | None = None  # computed on first use: most picks never fail over

    @property
    def order(self) -> tuple[str, ...]:
        """The winner, then the other available targets by declared order, price or weight (per strategy)."""
        if self._order is None:
            candidates, weights = self._candidates, self._weights
            rest = [i for i, w in enumerate(weights) if w > 0.0 and candidates[i].name != self.winner]
            if self._rank_by == "weight":
                rest.sort(key=weights.__getitem__, reverse=True)  # stable: equal weights keep declared order
            elif self._rank_by == "price":
                rest = _by_price(candidates, rest)
            head = () if self.winner is None else (self.winner,)
            self._order = head + tuple(candidates[i].name for i in rest)
        return self._order

    @property
    def weights(self) -> dict[str, float]:
        """Each candidate's weight relative to the heaviest (1.0); 0.0 for a skipped target."""
        heaviest = max(self._weights, default=0.0) or 1.0
        return {c.name: w / heaviest for c, w in zip(self._candidates, self._weights, strict=True)}

    def __repr__(self) -> str:
        return f"Selection({self.strategy}, order={self.order}, affinity={self.affinity}, why={self.why!r})"


def select(
    strategy: str,
    candidates: Sequence[Candidate],
    *,
    now: float,
    rng: random.Random,
    config: SelectorConfig,
    session_target: str | None = None,
    warm_target: str | None = None,
    rr_state: RoundRobinState | None = None,
) -> Selection:
    """Pick a target among ``candidates`` (already filtered by the workload contract) and order the rest.

    ``session_target``: the target this session is pinned to (kept while available). ``warm_target``: the
    target that served this session within the warm-cache TTL (adaptive bonus). ``rr_state`` is required
    for ``round_robin`` (and for ``adaptive`` with routing disabled).
    """
    if strategy == "adaptive":
        if not config.routing_enabled:
            strategy = "round_robin"
    elif strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}")
    if strategy == "round_robin" and rr_state is None:
        raise ValueError("round_robin needs the virtual model's RoundRobinState")

    affinity: Affinity | None = None
    if len(candidates) == 1:  # nothing to choose: no weights, no draw
        only, health = candidates[0], candidates[0].health
        if health.cooldown_until is None or health.vitals(now).available:
            if session_target is not None:
                affinity = "honored" if only.name == session_target else "released"
            why = _released("only available target", affinity, session_target)
            return Selection(strategy, only.name, why, candidates, [only.weight], "weight", (), affinity)

    if strategy == "adaptive":
        weights = adaptive_weights(candidates, now, config, warm_target)
    else:
        weights = available_weights(candidates, now)
    available = len(weights) - weights.count(0.0)
    skipped: tuple[tuple[str, str], ...] = ()
    if available < len(weights):
        skipped = _skip_reasons(candidates, weights, now)
        if not available:
            return _nothing_available(strategy, candidates, now, skipped)

    kept, explored = -1, False
    if session_target is not None:
        affinity = "released"
        for index, candidate in enumerate(candidates):
            if candidate.name == session_target and weights[index] > 0.0:
                affinity, kept = "honored", index
                break

    if kept >= 0:
        winner, why = kept, "session pin kept"
    elif available == 1:
        winner, why = _first_available(candidates, weights)
        why = "only available target"
    elif strategy == "adaptive":
        winner, why, explored = adaptive_pick(candidates, weights, rng, config)
    elif strategy == "round_robin":
        winner, why = _round_robin(candidates, weights, rr_state)
    elif strategy == "weighted":
        winner, why = _weighted(candidates, weights, rng)
    elif strategy == "failover":
        winner, why = _first_available(candidates, weights)
    else:
        winner, why = _cheapest(candidates, weights)
    why = _released(why, affinity, session_target)
    rank_by = FAILOVER_RANKING.get(strategy, "weight")
    return Selection(strategy, candidates[winner].name, why, candidates, weights, rank_by, skipped, affinity,
                     explored=explored)


def available_weights(candidates: Sequence[Candidate], now: float) -> list[float]:
    """Configured weights, aligned with ``candidates``; 0.0 for a target that is not available."""
    weights: list[float] = []
    for candidate in candidates:
        health = candidate.health
        if health.cooldown_until is None or health.vitals(now).available:
            weights.append(candidate.weight)
        else:
            weights.append(0.0)
    return weights


def _weighted(candidates: Sequence[Candidate], weights: list[float], rng: random.Random) -> tuple[int, str]:
    cumulative = list(accumulate(weights))
    winner = _index_at(cumulative, weights, rng.random() * cumulative[-1], exclude=-1)
    return winner, f"weighted draw: {candidates[winner].name}"


def _round_robin(
    candidates: Sequence[Candidate], weights: list[float], state: RoundRobinState | None
) -> tuple[int, str]:
    """nginx's smooth weighted round robin over the available targets.

    Each pick adds every available target's weight to its running value, picks the largest (the first on
    ties) and subtracts the total from it. A session that keeps its pin does not take a turn.
    """
    if state is None:
        raise ValueError("the round_robin strategy needs the virtual model's RoundRobinState")
    current = state.current
    winner, best, total = -1, 0.0, 0.0
    for index, weight in enumerate(weights):
        if weight == 0.0:
            continue
        name = candidates[index].name
        value = current.get(name, 0.0) + weight
        current[name] = value
        total += weight
        if winner < 0 or value > best:
            winner, best = index, value
    current[candidates[winner].name] = best - total
    return winner, f"round robin turn: {candidates[winner].name}"


def _first_available(candidates: Sequence[Candidate], weights: list[float]) -> tuple[int, str]:
    for index, weight in enumerate(weights):
        if weight > 0.0:
            return index, f"first available in order: {candidates[index].name}"
    raise ValueError("no available candidate")  # unreachable: select() returns earlier


def _cheapest(candidates: Sequence[Candidate], weights: list[float]) -> tuple[int, str]:
    """The cheapest available priced target (the first on ties), else the first available one."""
    best = -1
    for index, weight in enumerate(weights):
        price = candidates[index].price
        if weight > 0.0 and price is not None and (best < 0 or price < (candidates[best].price or 0.0)):
            best = index
    if best < 0:
        index, _ = _first_available(candidates, weights)
        return index, f"no available target is priced; first in order: {candidates[index].name}"
    return best, f"cheapest available: {candidates[best].name} at {candidates[best].price:g}/1M"


def _by_price(candidates: Sequence[Candidate], indexes: list[int]) -> list[int]:
    """Priced targets by price (ties: declared order), then the unpriced ones in declared order."""
    priced = sorted((i for i in indexes if candidates[i].price is not None), key=lambda i: candidates[i].price or 0.0)
    return priced + [i for i in indexes if candidates[i].price is None]


def _released(why: str, affinity: Affinity | None, session_target: str | None) -> str:
    if affinity == "released":
        return f"session pin on {session_target} released (not available); {why}"
    return why


def _skip_reasons(candidates: Sequence[Candidate], weights: list[float], now: float) -> tuple[tuple[str, str], ...]:
    skipped = []
    for index, weight in enumerate(weights):
        if weight == 0.0:
            candidate = candidates[index]
            cooling = candidate.health.vitals(now).status == COOLING
            skipped.append((candidate.name, "cooling" if cooling else "probe_busy"))
    return tuple(skipped)


def _nothing_available(
    strategy: str, candidates: Sequence[Candidate], now: float, skipped: tuple[tuple[str, str], ...]
) -> Selection:
    """Every target is cooling (or busy probing): no attempt now, but when to come back.

    The gateway answers 503 with Retry-After instead of probing a target early: a cooldown is the
    provider's verdict (429, Retry-After, 401) or the breaker's, and an early request would only prolong it.
    """
    if not candidates:
        return Selection(strategy, None, "no candidates")
    retry_after = MIN_RETRY_AFTER_S
    for index, candidate in enumerate(candidates):
        vitals = candidate.health.vitals(now)
        until = vitals.cooldown_until
        wait = until - now if vitals.status == COOLING and until is not None else MIN_RETRY_AFTER_S
        retry_after = wait if index == 0 or wait < retry_after else retry_after
    retry_after = max(retry_after, MIN_RETRY_AFTER_S)
    why = f"every target is cooling down; the first recovers in {retry_after:.0f}s"
    weights = [0.0] * len(candidates)
    return Selection(strategy, None, why, candidates, weights, "weight", skipped, None, retry_after)
