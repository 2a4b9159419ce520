"""Cold start and exploration in the adaptive selector: a new target is weighed as the fastest until it has N
latency samples, and a share of the picks is a uniform draw among the healthy targets.

Randomness is injected: a seeded ``random.Random`` for shares (N = 20,000 picks, tolerance 0.015, > 4 sigma as
in test_selector), or a scripted generator whose draws the test states, for single picks.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable
from typing import Any

import pytest

from routing.core.health import TargetHealth
from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.core.selector import Candidate, Selection, SelectorConfig, adaptive_weights, select

N = 20_000
SHARE = 0.015
NOW = 1_000.0
RATE_LIMITED = AttemptOutcome.failure(ErrorClass.TRANSIENT, "rate_limited", status=429)


class ScriptedRandom(random.Random):
    """A generator whose ``random()`` returns the given draws in order (the selector uses only ``random()``)."""

    def __init__(self, draws: Iterable[float]) -> None:
        super().__init__(0)
        self.draws = list(draws)

    def random(self) -> float:
        return self.draws.pop(0)


def measured(name: str, latency_s: float, *, samples: int = 10) -> TargetHealth:
    health = TargetHealth(name)
    for index in range(samples):
        health.record(AttemptOutcome.success(latency_s), now=NOW - 60.0 + index)
    return health


def cooling(name: str) -> TargetHealth:
    health = measured(name, 0.1)
    health.record(RATE_LIMITED, now=NOW - 1.0)  # 30 s cooldown
    return health


def probing(name: str) -> TargetHealth:
    health = measured(name, 0.1)
    health.record(RATE_LIMITED, now=NOW - 31.0)  # cooldown over: half-open
    return health


def candidates(*healths: TargetHealth) -> list[Candidate]:
    return [Candidate(h.name, h) for h in healths]


def config(**options: Any) -> SelectorConfig:
    return SelectorConfig(**{"min_weight_fraction": 0.0, **options})


def pick(cands: list[Candidate], rng: random.Random, **options: Any) -> Selection:
    session = options.pop("session_target", None)
    return select("adaptive", cands, now=NOW, rng=rng, config=config(**options), session_target=session)


def shares(cands: list[Candidate], **options: Any) -> dict[str, float]:
    rng = random.Random(42)
    wins = Counter(pick(cands, rng, **options).winner for _ in range(N))
    return {c.name: wins[c.name] / N for c in cands}


# -- observations -------------------------------------------------------------------------------------------


def test_it_counts_answers_and_the_targets_own_failures_as_observations() -> None:
    health = TargetHealth("a")
    health.record(AttemptOutcome.success(0.2), now=1.0)
    health.record(AttemptOutcome.failure(ErrorClass.TRANSIENT, "server_error", status=503), now=2.0)
    health.record(AttemptOutcome.failure(ErrorClass.PERMANENT, "bad_request", status=400), now=3.0)  # the client's
    assert health.observations == 2
    assert health.snapshot(4.0).observations == 2


def test_it_forgets_its_observations_on_reset() -> None:
    health = measured("a", 0.2, samples=3)
    health.reset()
    assert health.observations == 0


# -- cold start ---------------------------------------------------------------------------------------------


def test_it_weighs_a_target_in_cold_start_as_the_fastest() -> None:
    fast, new = measured("fast", 0.1), measured("new", 2.0, samples=1)  # one slow first answer
    cands = candidates(fast, new)
    assert adaptive_weights(cands, NOW, config(cold_start_observations=5)) == pytest.approx([10.0, 10.0])
    assert adaptive_weights(cands, NOW, config(cold_start_observations=0)) == pytest.approx([10.0, 0.5])


def test_it_ends_the_bonus_once_the_target_has_n_observations() -> None:
    fast, new = measured("fast", 0.1), measured("new", 2.0, samples=4)
    cands = candidates(fast, new)
    assert adaptive_weights(cands, NOW, config(cold_start_observations=5))[1] == pytest.approx(10.0)
    new.record(AttemptOutcome.success(2.0), now=NOW)  # the fifth sample
    assert adaptive_weights(cands, NOW, config(cold_start_observations=5))[1] == pytest.approx(0.5)


def test_it_gives_a_new_target_its_share_until_its_estimate_counts() -> None:
    fast, new = measured("fast", 0.1), measured("new", 2.0, samples=1)
    cold = shares(candidates(fast, new), cold_start_observations=5)
    warm = shares(candidates(fast, new), cold_start_observations=1)
    assert cold["new"] == pytest.approx(0.5, abs=SHARE)
    assert warm["new"] == pytest.approx(0.5 / 10.5, abs=SHARE)


def test_it_says_in_the_why_that_the_winner_is_in_cold_start() -> None:
    new, fast = measured("new", 0.1, samples=2), measured("fast", 0.1)
    selection = pick(candidates(new, fast), ScriptedRandom([0.0, 0.9]), cold_start_observations=5)
    assert selection.winner == "new"
    assert selection.why.endswith("(cold start: 2 of 5 observations)")
    assert not selection.explored


# -- exploration --------------------------------------------------------------------------------------------


def test_it_explores_when_the_draw_falls_within_the_share() -> None:
    cands = candidates(measured("a", 0.1), measured("b", 0.1), measured("c", 5.0))
    selection = pick(cands, ScriptedRandom([0.009, 0.99]), exploration=0.01)
    assert selection.winner == "c"  # uniform: the third of three for a draw of 0.99, however slow
    assert selection.explored
    assert selection.why == "exploration: uniform draw among 3 healthy targets: c"
    assert selection.order[0] == "c"


def test_it_picks_by_weight_when_the_draw_falls_outside_the_share() -> None:
    cands = candidates(measured("a", 0.1), measured("b", 0.1), measured("c", 5.0))
    selection = pick(cands, ScriptedRandom([0.01, 0.0, 0.0]), exploration=0.01)
    assert selection.winner == "a"
    assert not selection.explored
    assert selection.why.startswith("p2c")


def test_it_sends_the_exploration_share_uniformly_to_a_target_the_weights_starve() -> None:
    cands = candidates(measured("fast", 0.1), measured("slow", 10.0))
    starved = shares(cands)["slow"]
    explored = shares(cands, exploration=0.2)["slow"]
    assert starved == pytest.approx(0.01 / 1.01, abs=SHARE)
    assert explored == pytest.approx(0.2 * 0.5 + 0.8 * 0.01 / 1.01, abs=SHARE)


@pytest.mark.parametrize("draw", [0.0, 0.2, 0.4, 0.6, 0.8, 0.999])
def test_it_never_explores_a_cooling_or_half_open_target(draw: float) -> None:
    cands = candidates(cooling("cool"), measured("a", 0.1), probing("probe"), measured("b", 3.0))
    selection = pick(cands, ScriptedRandom([0.0, draw]), exploration=0.5)
    assert selection.explored
    assert selection.winner in ("a", "b")


def test_it_only_ever_explores_healthy_targets_over_many_picks() -> None:
    cands = candidates(cooling("cool"), measured("a", 0.1), probing("probe"), measured("b", 3.0))
    rng = random.Random(3)
    explored = Counter(s.winner for s in (pick(cands, rng, exploration=0.5) for _ in range(2_000)) if s.explored)
    assert set(explored) == {"a", "b"}


def test_it_does_not_explore_with_a_single_healthy_target() -> None:
    cands = candidates(measured("a", 0.1), probing("probe"))
    selection = pick(cands, ScriptedRandom([0.0, 0.9, 0.9]), exploration=0.5)
    assert not selection.explored


def test_it_keeps_a_session_on_its_target_whatever_the_exploration_share() -> None:
    cands = candidates(measured("a", 0.1), measured("b", 0.1), measured("c", 0.1))
    rng = random.Random(5)
    selections = [pick(cands, rng, exploration=0.5, session_target="b") for _ in range(200)]
    assert {s.winner for s in selections} == {"b"}
    assert not any(s.explored for s in selections)


def test_it_explores_the_same_way_for_the_same_seed() -> None:
    cands = candidates(measured("a", 0.1), measured("b", 0.4), measured("c", 2.0))
    first, again = random.Random(9), random.Random(9)
    one = [(s.winner, s.explored) for s in (pick(cands, first, exploration=0.3) for _ in range(200))]
    two = [(s.winner, s.explored) for s in (pick(cands, again, exploration=0.3) for _ in range(200))]
    assert one == two
    assert any(explored for _, explored in one)


def test_it_explores_only_the_adaptive_strategy() -> None:
    cands = candidates(measured("a", 0.1), measured("b", 5.0))
    selection = select("failover", cands, now=NOW, rng=ScriptedRandom([0.0, 0.9]), config=config(exploration=0.5))
    assert selection.winner == "a"
    assert not selection.explored
