"""Adaptive selection: per-request weights (latency, price, warm cache, floor) and the power-of-two-choices pick.

``select`` (``routing.core.selector``) uses this for the ``adaptive`` strategy; ``_index_at`` is also the
weighted strategy's draw. ``adaptive_pick`` is the strategy's pick: the exploration share's uniform draw
among the healthy targets, else the power of two choices. This is the selector's hot path: an adaptive pick
over 8 targets must stay within 10 microseconds (``bench/micro_selector.py``), hence flat loops over
index-aligned lists.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate

from routing.core.candidate import MIN_PRICE, Candidate
from routing.core.table import OBJECTIVES, SettingsInForce

# The exponent of (cheapest price / own price) in an adaptive weight, per objective.
PRICE_EXPONENT: Mapping[str, int] = {"latency": 0, "balanced": 1, "cost": 2}
MIN_LATENCY_S = 1e-6  # estimates below this count as this (no division by zero)


@dataclass(frozen=True, slots=True)
class SelectorConfig:
    """The PRO_ROUTING_* values the selector needs (the warm-cache TTL is the caller's: it decides warmth).

    Exploration and the cold-start bonus are off in a bare ``SelectorConfig()``, so a pick is a function of
    the weights alone (what most tests of the weights want); the gateway's defaults (1% and 5) come from
    ``SettingsInForce`` through ``from_settings``.
    """

    routing_enabled: bool = True
    objective: str = "balanced"
    min_weight_fraction: float = 0.05
    warm_cache_weight: float = 8.0
    exploration: float = 0.0  # share of picks drawn uniformly among the healthy targets
    cold_start_observations: int = 0  # a target with fewer latency samples counts as the fastest

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}")
        if not 0.0 <= self.min_weight_fraction <= 0.5:
            raise ValueError("min_weight_fraction must be within 0-0.5")
        if self.warm_cache_weight < 1.0:
            raise ValueError("warm_cache_weight must be >= 1")
        if not 0.0 <= self.exploration <= 0.5:
            raise ValueError("exploration must be within 0-0.5")
        if self.cold_start_observations < 0:
            raise ValueError("cold_start_observations must be >= 0")

    @staticmethod
    def from_settings(settings: SettingsInForce) -> SelectorConfig:
        return SelectorConfig(
            routing_enabled=settings.routing_enabled,
            objective=settings.routing_objective,
            min_weight_fraction=settings.min_weight_fraction,
            warm_cache_weight=settings.warm_cache_weight,
            exploration=settings.exploration,
            cold_start_observations=settings.cold_start_observations,
        )


def adaptive_weights(
    candidates: Sequence[Candidate], now: float, config: SelectorConfig, warm_target: str | None = None
) -> list[float]:
    """Per-request weights, aligned with ``candidates``; 0.0 for a target that is not available.

    weight = configured weight / latency estimate x (1 / price) ** k, x warm_cache_weight for a healthy warm
    target, then raised to at least min_weight_fraction x the heaviest. k is 0 (objective latency),
    1 (balanced) or 2 (cost). Only ratios matter: twice the latency halves the share, twice the price
    halves it under balanced and quarters it under cost. A target never measured counts as fast as the
    fastest measured one (it earns its configured share until its first answer), and so does a target in
    cold start, with fewer than ``cold_start_observations`` latency samples: a slow first answer (a cold
    connection, a cold cache) must not starve it before it has an estimate worth trusting. An unpriced
    target counts as the dearest available priced one (an unknown price never attracts traffic).
    """
    exponent = PRICE_EXPONENT[config.objective]
    cold_start = config.cold_start_observations
    weights: list[float] = []
    append = weights.append  # the loop below is the selector's hot spot
    deferred: list[int] = []  # unmeasured or unpriced: their weight needs the fastest or dearest peer
    for candidate in candidates:
        health = candidate.health
        if health.cooldown_until is not None and not health.vitals(now).available:
            append(0.0)
            continue
        latency = health.latency_estimate_s
        static = candidate.price_weights[exponent]
        if latency is None or static is None or health.observations < cold_start:
            deferred.append(len(weights))
            append(-1.0)  # weighed by _weigh_unknowns once the fastest and dearest are known
            continue
        append(static / (latency if latency > MIN_LATENCY_S else MIN_LATENCY_S))
    if deferred:
        _weigh_unknowns(candidates, weights, deferred, exponent, cold_start)
    if warm_target is not None:
        for index, candidate in enumerate(candidates):
            if candidate.name == warm_target:
                if weights[index] > 0.0 and candidate.health.cooldown_until is None:
                    weights[index] *= config.warm_cache_weight
                break
    floor = config.min_weight_fraction * max(weights, default=0.0)
    if floor > min(weights, default=0.0):
        weights = [w if w >= floor or w == 0.0 else floor for w in weights]
    return weights


def _weigh_unknowns(
    candidates: Sequence[Candidate], weights: list[float], deferred: list[int], exponent: int, cold_start: int
) -> None:
    """Weigh available targets never measured or in cold start (as the fastest) or unpriced (as the dearest),
    in place; ``weights`` holds -1.0 at the ``deferred`` indexes. One flat pass: this runs on every pick while
    any target is in cold start."""
    fastest: float | None = None
    dearest: float | None = None
    for index, candidate in enumerate(candidates):
        if weights[index] == 0.0:  # not available
            continue
        latency = candidate.health.latency_estimate_s
        if latency is not None and (fastest is None or latency < fastest):
            fastest = latency
        price = candidate.price
        if price is not None and (dearest is None or price > dearest):
            dearest = price
    fastest = 1.0 if fastest is None else max(fastest, MIN_LATENCY_S)
    for index in deferred:
        candidate = candidates[index]
        health = candidate.health
        latency = health.latency_estimate_s
        latency = fastest if latency is None or health.observations < cold_start else max(latency, MIN_LATENCY_S)
        static = candidate.price_weights[exponent]
        if static is None:  # unpriced; when no available target is priced at all, price plays no part
            static = candidate.weight
            if exponent and dearest is not None:
                price = max(dearest, MIN_PRICE)
                static /= price if exponent == 1 else price * price
        weights[index] = static / latency


def _power_of_two_choices(candidates: Sequence[Candidate], weights: list[float], rng: random.Random) -> tuple[int, str]:
    """Draw two distinct candidates in proportion to weight; the lower load wins, a tie goes to the first.

    load = latency estimate x attempts in flight: the work the target still owes. Idle targets tie at 0, so
    at low concurrency the shares follow the weights exactly; under concurrency a busy target (many or slow
    attempts in flight) loses. A target never measured counts as fast as the one it is compared with.
    """
    cumulative = list(accumulate(weights))
    total = cumulative[-1]
    first = _index_at(cumulative, weights, rng.random() * total, exclude=-1)
    first_weight = weights[first]
    point = rng.random() * (total - first_weight)
    if point >= cumulative[first] - first_weight:
        point += first_weight  # step over the first draw's span
    second = _index_at(cumulative, weights, point, exclude=first)
    a, b = candidates[first], candidates[second]
    a_latency, b_latency = a.health.latency_estimate_s, b.health.latency_estimate_s
    if a_latency is None:
        a_latency = 1.0 if b_latency is None else b_latency
    if b_latency is None:
        b_latency = a_latency
    a_load, b_load = a_latency * a.health.in_flight, b_latency * b.health.in_flight
    if b_load < a_load:
        return second, f"p2c {a.name} vs {b.name}: {b.name} less loaded"
    if a_load < b_load:
        return first, f"p2c {a.name} vs {b.name}: {a.name} less loaded"
    return first, f"p2c {a.name} vs {b.name}: equal load, {a.name} drawn first"


def _index_at(cumulative: list[float], weights: list[float], point: float, *, exclude: int) -> int:
    """The index whose cumulative span holds ``point``; rounding at the top end falls to the last eligible."""
    index = bisect_right(cumulative, point)
    if index < len(weights) and weights[index] > 0.0 and index != exclude:
        return index
    for index in range(len(weights) - 1, -1, -1):
        if weights[index] > 0.0 and index != exclude:
            return index
    raise ValueError("no eligible candidate")  # unreachable: callers ensure two available targets


def adaptive_pick(
    candidates: Sequence[Candidate], weights: list[float], rng: random.Random, config: SelectorConfig
) -> tuple[int, str, bool]:
    """The adaptive strategy's winner, why, and whether the exploration share drew it (two available targets
    or more: the caller handles the rest).

    A share ``exploration`` of the picks is a uniform draw among the healthy targets; the rest is the power
    of two choices. A winner still in cold start says so in the why.
    """
    drawn = None
    if config.exploration and rng.random() < config.exploration:
        drawn = _explore(candidates, weights, rng)
    winner, why = drawn or _power_of_two_choices(candidates, weights, rng)
    cold_start = config.cold_start_observations
    if cold_start:
        observations = candidates[winner].health.observations
        if observations < cold_start:
            why = f"{why} (cold start: {observations} of {cold_start} observations)"
    return winner, why, drawn is not None


def _explore(candidates: Sequence[Candidate], weights: list[float], rng: random.Random) -> tuple[int, str] | None:
    """A uniform draw among the healthy targets (available, breaker closed), or None when there are fewer than 2.

    The exploration share's pick: each healthy target gets the same chance whatever its weight, so a target
    whose estimate is stale or pessimistic (new, or back from a cooldown) is measured again. A half-open
    target is left to its probe slots, and whatever the weights already excluded (cooling, probe slots
    taken, over a limit) is never drawn.
    """
    healthy = [i for i, w in enumerate(weights) if w > 0.0 and candidates[i].health.cooldown_until is None]
    if len(healthy) < 2:
        return None
    index = healthy[int(rng.random() * len(healthy)) % len(healthy)]
    return index, f"exploration: uniform draw among {len(healthy)} healthy targets: {candidates[index].name}"
