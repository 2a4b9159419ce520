"""Target selection: the strategies, the adaptive weights, session keeping and what happens when all cool down.

Randomness is a seeded ``random.Random`` and time a plain float. Shares are measured over N = 20,000 picks;
a share's standard error is at most sqrt(0.25 / N) = 0.0035, so share tolerances of 0.015 are > 4 sigma.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from routing.core.health import HealthConfig, TargetHealth, TargetStateView
from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.core.selector import (
    Candidate,
    RoundRobinState,
    Selection,
    SelectorConfig,
    adaptive_weights,
    select,
)
from routing.core.table import SettingsInForce

N = 20_000
SHARE = 0.015  # tolerance on a share measured over N picks (see the module docstring)
NOW = 1_000.0
DEFAULT = SelectorConfig()
RATE_LIMITED = AttemptOutcome.failure(ErrorClass.TRANSIENT, "rate_limited", status=429)


def healthy(name: str, latency_s: float | None = 0.5, *, in_flight: int = 0) -> TargetHealth:
    health = TargetHealth(name)
    if latency_s is not None:
        health.record(AttemptOutcome.success(latency_s), now=NOW - 60.0)
    for _ in range(in_flight):
        health.begin(NOW - 1.0)
    return health


def cooling(name: str, *, since: float = NOW - 1.0) -> TargetHealth:
    health = healthy(name)
    health.record(RATE_LIMITED, now=since)  # 30 s cooldown from ``since``
    return health


def probing(name: str) -> TargetHealth:
    return cooling(name, since=NOW - 31.0)


def candidate(health: TargetHealth, weight: float = 1.0, price: float | None = None) -> Candidate:
    return Candidate(health.name, health, weight=weight, price=price)


def pick(strategy: str, candidates: list[Candidate], *, seed: int = 1, **options: Any) -> Selection:
    options.setdefault("config", DEFAULT)
    return select(strategy, candidates, now=NOW, rng=random.Random(seed), **options)


def shares(strategy: str, candidates: list[Candidate], *, picks: int = N, **options: Any) -> dict[str, float]:
    """Each target's share of ``picks`` selections with one seeded generator (health does not change)."""
    rng = random.Random(42)
    options.setdefault("config", DEFAULT)
    wins = Counter(select(strategy, candidates, now=NOW, rng=rng, **options).winner for _ in range(picks))
    return {c.name: wins[c.name] / picks for c in candidates}


# -- adaptive: shares --------------------------------------------------------------------------------------


def test_it_shares_traffic_by_configured_weight_when_targets_are_equally_healthy() -> None:
    got = shares("adaptive", [candidate(healthy("a"), 3.0), candidate(healthy("b"), 1.0)])
    assert got["a"] == pytest.approx(0.75, abs=SHARE)


@pytest.mark.parametrize(
    ("objective", "expected_ratio"),
    [
        ("latency", 1.0),  # price plays no part
        ("balanced", 0.5),  # 1 / price
        ("cost", 0.25),  # 1 / price^2: twice the price, a quarter of the share
    ],
)
def test_it_shares_traffic_by_objective(objective: str, expected_ratio: float) -> None:
    config = SelectorConfig(objective=objective)
    got = shares(
        "adaptive", [candidate(healthy("cheap"), price=1.0), candidate(healthy("dear"), price=2.0)], config=config
    )
    assert got["dear"] == pytest.approx(expected_ratio / (1.0 + expected_ratio), abs=SHARE)
    assert got["dear"] / got["cheap"] == pytest.approx(expected_ratio, rel=0.08)


def test_it_gives_a_target_twice_as_slow_half_the_share() -> None:
    config = SelectorConfig(objective="latency")
    got = shares("adaptive", [candidate(healthy("fast", 0.5)), candidate(healthy("slow", 1.0))], config=config)
    assert got["slow"] == pytest.approx(1 / 3, abs=SHARE)


def test_it_keeps_a_trickle_for_a_very_slow_target_through_the_weight_floor() -> None:
    targets = [candidate(healthy("fast", 0.1)), candidate(healthy("slow", 10.0))]
    got = shares("adaptive", targets, config=SelectorConfig(objective="latency", min_weight_fraction=0.05))
    assert got["slow"] == pytest.approx(0.05 / 1.05, abs=0.006)  # 1/100 of the weight, lifted to 5 %
    without_floor = shares("adaptive", targets, config=SelectorConfig(objective="latency", min_weight_fraction=0))
    assert without_floor["slow"] == pytest.approx(1 / 101, abs=0.004)


def test_it_keeps_every_available_target_above_the_floor() -> None:
    rng = random.Random(3)
    for _ in range(300):
        config = SelectorConfig(
            objective=rng.choice(["latency", "balanced", "cost"]), min_weight_fraction=rng.uniform(0.0, 0.5)
        )
        targets = [
            candidate(healthy(f"t{i}", rng.uniform(0.01, 30.0)), rng.uniform(0.1, 10.0), rng.uniform(0.01, 100.0))
            for i in range(rng.randint(2, 8))
        ]
        weights = adaptive_weights(targets, NOW, config, warm_target=rng.choice([None, "t0", "t1"]))
        assert min(weights) >= config.min_weight_fraction * max(weights) * (1 - 1e-12)


def test_it_lets_an_unmeasured_target_earn_its_configured_share() -> None:
    got = shares(
        "adaptive",
        [candidate(healthy("known", 2.0)), candidate(healthy("new", latency_s=None))],
        config=SelectorConfig(objective="latency"),
    )
    assert got["new"] == pytest.approx(0.5, abs=SHARE)  # counted as fast as the fastest measured one


def test_it_weighs_an_unpriced_target_like_the_dearest_under_cost() -> None:
    targets = [
        candidate(healthy("cheap"), price=1.0),
        candidate(healthy("dear"), price=2.0),
        candidate(healthy("unknown")),
    ]
    got = shares("adaptive", targets, config=SelectorConfig(objective="cost"))
    assert got["unknown"] == pytest.approx(got["dear"], abs=SHARE)
    assert got["cheap"] == pytest.approx(4 / 6, abs=SHARE)


def test_it_does_not_let_a_target_that_fails_fast_look_fast() -> None:
    flaky = healthy("flaky", 0.2)
    for second in (1.0, 2.0):  # two fast 5xx (not yet three: it is not cooling)
        flaky.record(
            AttemptOutcome.failure(ErrorClass.TRANSIENT, "server_error", status=500, latency_s=0.01),
            now=NOW - 10.0 + second,
        )
    got = shares(
        "adaptive", [candidate(flaky), candidate(healthy("steady", 0.8))], config=SelectorConfig(objective="latency")
    )
    assert got["steady"] > 0.65  # flaky counts as 2 s (the failure penalty), steady as 0.8 s: 2/2.8 = 0.71


# -- adaptive: power of two choices ----------------------------------------------------------------------------


def test_it_prefers_the_less_loaded_of_the_two_drawn() -> None:
    busy, idle = healthy("busy", in_flight=3), healthy("idle")
    for seed in range(200):  # with two targets both are always drawn: the idle one always wins
        assert pick("adaptive", [candidate(busy), candidate(idle)], seed=seed).winner == "idle"


def test_it_sheds_traffic_from_a_busy_target_among_many() -> None:
    targets = [candidate(healthy("busy", in_flight=4))] + [candidate(healthy(f"idle{i}")) for i in range(3)]
    got = shares("adaptive", targets)
    assert got["busy"] == pytest.approx(0.0, abs=SHARE)  # it wins only when drawn against itself: never
    assert all(got[f"idle{i}"] == pytest.approx(1 / 3, abs=SHARE) for i in range(3))


def test_it_compares_load_as_latency_times_attempts_in_flight() -> None:
    quick = healthy("quick", 0.2, in_flight=3)  # owes 0.6 s of work
    sluggish = healthy("sluggish", 2.0, in_flight=1)  # owes 2 s
    selection = pick("adaptive", [candidate(quick), candidate(sluggish)])
    assert selection.winner == "quick"
    assert "less loaded" in selection.why


# -- cooldowns in selection ------------------------------------------------------------------------------------


def test_it_skips_targets_in_cooldown_while_any_other_is_available() -> None:
    targets = [candidate(cooling("a"), 10.0), candidate(healthy("b")), candidate(healthy("c"))]
    for strategy in ("adaptive", "weighted", "failover", "cost"):
        selection = pick(strategy, targets, rr_state=RoundRobinState())
        assert selection.winner in {"b", "c"}
        assert "a" not in selection.order
        assert selection.skipped == (("a", "cooling"),)
    assert shares("adaptive", targets, picks=2_000)["a"] == 0.0


def test_it_answers_with_retry_after_when_every_target_is_cooling() -> None:
    early = cooling("early", since=NOW - 20.0)  # recovers in 10 s
    late = cooling("late", since=NOW - 5.0)  # recovers in 25 s
    selection = pick("adaptive", [candidate(late), candidate(early)], session_target="late")
    assert selection.winner is None
    assert selection.order == ()
    assert selection.all_cooling_retry_after_s == pytest.approx(10.0, abs=1e-9)
    assert selection.skipped == (("late", "cooling"), ("early", "cooling"))
    assert selection.affinity is None  # nothing was chosen, so the pin is neither kept nor moved


def test_it_asks_for_a_short_retry_when_the_only_probe_slot_is_taken() -> None:
    health = probing("a")
    assert health.begin(NOW) == "probe"
    selection = pick("failover", [candidate(health), candidate(cooling("b"))])
    assert selection.winner is None
    assert selection.skipped == (("a", "probe_busy"), ("b", "cooling"))
    assert selection.all_cooling_retry_after_s == 1.0


def test_it_routes_a_probe_to_a_recovering_target() -> None:
    selection = pick("failover", [candidate(probing("a")), candidate(healthy("b"))])
    assert selection.winner == "a"


def test_it_sheds_a_rate_limited_target_at_once_and_gives_it_back_traffic_after_its_cooldown() -> None:
    """A small engine loop over a fake clock: one request a second; target a answers 429 from 10 s to 60 s."""
    targets = {name: TargetHealth(name, HealthConfig(cooldown_base_s=30.0)) for name in ("a", "b")}
    candidates = [candidate(h) for h in targets.values()]
    rng = random.Random(5)
    served: list[str] = []
    tried_a_while_limited = 0
    for second in range(150):
        now = float(second)
        selection = select("adaptive", candidates, now=now, rng=rng, config=DEFAULT)
        for name in selection.order:  # walk the failover chain like the engine does
            health = targets[name]
            admission = health.begin(now)
            if admission == "refused":
                continue
            limited = name == "a" and 10 <= second < 60
            tried_a_while_limited += limited
            health.record(RATE_LIMITED if limited else AttemptOutcome.success(0.5), now)
            health.end(now, probe=admission == "probe")
            if not limited:
                served.append(name)
                break
    assert len(served) == 150  # every request was answered: the 429s were absorbed by the failover chain
    assert 1 <= served[:10].count("a") <= 9  # both shared the traffic before
    # 50 requests while a was limited, yet a was tried only twice: its first 429 (then 30 s of cooldown) and
    # the one probe after it (then 60 s, past the limited window). More is impossible; fewer would need a to
    # lose 20 draws in a row at 1/3 each ((2/3)^20 < 0.001), which this seed does not.
    assert tried_a_while_limited == 2
    assert "a" in served[120:]  # back after its second cooldown, once it answers again


# -- warm prompt cache -------------------------------------------------------------------------------------


def test_it_favours_the_warm_target() -> None:
    got = shares("adaptive", [candidate(healthy("a")), candidate(healthy("warm"))], warm_target="warm")
    assert got["warm"] == pytest.approx(8 / 9, abs=SHARE)


def test_it_drops_the_warm_bonus_of_a_cooling_or_recovering_target() -> None:
    assert (
        shares("adaptive", [candidate(healthy("a")), candidate(cooling("warm"))], warm_target="warm", picks=500)["warm"]
        == 0.0
    )
    recovering = [candidate(healthy("a")), candidate(probing("warm"))]
    with_bonus = shares("adaptive", recovering, warm_target="warm")["warm"]
    assert with_bonus == shares("adaptive", recovering)["warm"]  # same seed, same weights: no bonus
    assert with_bonus == pytest.approx(1 / 3, abs=SHARE)  # its 429 doubled its latency estimate


# -- session keeping ---------------------------------------------------------------------------------------


def test_it_keeps_a_session_on_its_healthy_target_even_against_a_far_better_one() -> None:
    pinned = candidate(healthy("pinned", 3.0), price=30.0)
    better = candidate(healthy("better", 0.1), price=0.1)
    for seed in range(300):
        selection = pick("adaptive", [better, pinned], seed=seed, session_target="pinned")
        assert (selection.winner, selection.affinity) == ("pinned", "honored")
        assert selection.order == ("pinned", "better")


def test_it_releases_a_session_whose_target_is_cooling() -> None:
    selection = pick("adaptive", [candidate(cooling("pinned")), candidate(healthy("other"))], session_target="pinned")
    assert (selection.winner, selection.affinity) == ("other", "released")
    assert selection.why.startswith("session pin on pinned released")


def test_it_releases_a_session_whose_target_is_no_longer_a_candidate() -> None:
    selection = pick("adaptive", [candidate(healthy("a")), candidate(healthy("b"))], session_target="gone")
    assert selection.affinity == "released"
    assert selection.winner in {"a", "b"}


def test_it_keeps_a_session_under_every_strategy_without_taking_a_turn() -> None:
    state = RoundRobinState()
    targets = [candidate(healthy("a"), 5.0), candidate(healthy("b"))]
    for strategy in ("round_robin", "weighted", "failover", "cost", "adaptive"):
        selection = pick(strategy, targets, session_target="b", rr_state=state)
        assert (selection.winner, selection.affinity) == ("b", "honored")
    assert state.current == {}


def test_it_reports_no_affinity_without_a_session() -> None:
    assert pick("adaptive", [candidate(healthy("a")), candidate(healthy("b"))]).affinity is None


# -- round robin, weighted, failover, cost -------------------------------------------------------------------


def test_it_spreads_round_robin_smoothly_by_weight() -> None:
    targets = [candidate(healthy("a"), 5.0), candidate(healthy("b"), 1.0), candidate(healthy("c"), 1.0)]
    state = RoundRobinState()
    picks = [pick("round_robin", targets, rr_state=state).winner for _ in range(14)]
    assert "".join(p or "-" for p in picks) == "aabacaa" * 2


def test_it_skips_a_cooling_target_in_round_robin() -> None:
    targets = [candidate(healthy("a")), candidate(cooling("b")), candidate(healthy("c"))]
    state = RoundRobinState()
    assert [pick("round_robin", targets, rr_state=state).winner for _ in range(4)] == ["a", "c", "a", "c"]


def test_it_falls_back_to_round_robin_when_adaptive_routing_is_disabled() -> None:
    targets = [candidate(healthy("a"), 2.0), candidate(healthy("b", 9.0), 1.0)]
    state = RoundRobinState()
    config = SelectorConfig(routing_enabled=False)
    picks = [pick("adaptive", targets, config=config, rr_state=state) for _ in range(3)]
    assert [s.winner for s in picks] == ["a", "b", "a"]
    assert picks[0].strategy == "round_robin"


def test_it_draws_weighted_targets_in_proportion_to_weight() -> None:
    got = shares("weighted", [candidate(healthy("a"), 1.0), candidate(healthy("b"), 3.0)])
    assert got["b"] == pytest.approx(0.75, abs=SHARE)


def test_it_fails_over_in_declared_order() -> None:
    targets = [candidate(cooling("first")), candidate(healthy("second")), candidate(healthy("third"))]
    selection = pick("failover", targets)
    assert selection.order == ("second", "third")


def test_it_picks_the_cheapest_available_priced_target_under_cost() -> None:
    targets = [
        candidate(healthy("unpriced")),
        candidate(healthy("dear"), price=10.0),
        candidate(cooling("cheapest"), price=0.5),
        candidate(healthy("cheap"), price=2.0),
        candidate(healthy("cheap-too"), price=2.0),
    ]
    selection = pick("cost", targets)
    assert selection.winner == "cheap"  # the cooling cheapest is skipped; ties go to the declared order
    assert selection.order == ("cheap", "cheap-too", "dear", "unpriced")  # unpriced only as the last resort
    assert selection.skipped == (("cheapest", "cooling"),)


def test_it_uses_declared_order_under_cost_when_nothing_is_priced() -> None:
    selection = pick("cost", [candidate(healthy("x")), candidate(healthy("y"))])
    assert selection.order == ("x", "y")
    assert "no available target is priced" in selection.why


# -- the selection itself --------------------------------------------------------------------------------------


class ExplodingRandom(random.Random):
    def random(self) -> float:
        raise AssertionError("a single available target needs no draw")


def test_it_returns_a_single_available_target_without_drawing() -> None:
    for strategy in ("adaptive", "weighted", "round_robin"):
        selection = select(
            strategy,
            [candidate(healthy("only")), candidate(cooling("other"))],
            now=NOW,
            rng=ExplodingRandom(),
            config=DEFAULT,
            rr_state=RoundRobinState(),
        )
        assert selection.order == ("only",)
        assert selection.why == "only available target"


def test_it_returns_a_lone_candidate_at_once_and_refuses_it_while_cooling() -> None:
    selection = select("adaptive", [candidate(healthy("only"))], now=NOW, rng=ExplodingRandom(), config=DEFAULT)
    assert (selection.order, selection.affinity) == (("only",), None)
    pinned = pick("cost", [candidate(healthy("only"))], session_target="only")
    assert pinned.affinity == "honored"
    cooled = pick("failover", [candidate(cooling("only"))], session_target="only")
    assert cooled.winner is None
    assert cooled.all_cooling_retry_after_s == pytest.approx(29.0, abs=1e-9)


def test_it_orders_the_failover_chain_winner_first_then_by_weight() -> None:
    targets = [
        candidate(healthy("light"), 1.0),
        candidate(healthy("heavy"), 4.0),
        candidate(healthy("mid"), 2.0),
        candidate(cooling("out"), 9.0),
    ]
    for seed in range(50):
        selection = pick("adaptive", targets, seed=seed)
        rest = [name for name in ("heavy", "mid", "light") if name != selection.winner]
        assert selection.order == (selection.winner, *rest)


def test_it_reports_weights_relative_to_the_heaviest() -> None:
    selection = pick(
        "adaptive",
        [candidate(healthy("a"), 4.0), candidate(healthy("b"), 1.0), candidate(cooling("c"))],
        config=SelectorConfig(objective="latency"),
    )
    assert selection.weights == {"a": 1.0, "b": 0.25, "c": 0.0}


def test_it_ranks_frozen_views_as_well_as_live_health() -> None:
    busy = TargetStateView(name="busy", status="healthy", available=True, latency_estimate_s=1.0, in_flight=5)
    idle = TargetStateView(name="idle", status="healthy", available=True, latency_estimate_s=1.0)
    out = TargetStateView(name="out", status="cooling", available=False, cooldown_until=NOW + 30.0)
    selection = pick("adaptive", [Candidate("busy", busy), Candidate("idle", idle), Candidate("out", out)])
    assert selection.winner == "idle"
    assert selection.skipped == (("out", "cooling"),)


def test_it_builds_its_config_from_the_routing_settings() -> None:
    settings = SettingsInForce(
        routing_enabled=False, routing_objective="cost", min_weight_fraction=0.2, warm_cache_weight=3.0,
        exploration=0.1, cold_start_observations=3,
    )
    assert SelectorConfig.from_settings(settings) == SelectorConfig(False, "cost", 0.2, 3.0, 0.1, 3)


@pytest.mark.parametrize(
    ("strategy", "options", "message"),
    [
        ("random", {}, "unknown strategy"),
        ("round_robin", {}, "RoundRobinState"),
    ],
)
def test_it_rejects_a_call_it_cannot_serve(strategy: str, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        pick(strategy, [candidate(healthy("a"))], **options)


@pytest.mark.parametrize(
    "arguments",
    [
        {"objective": "fastest"},
        {"min_weight_fraction": 0.6},
        {"warm_cache_weight": 0.5},
        {"exploration": 0.6},
        {"exploration": -0.1},
        {"cold_start_observations": -1},
    ],
)
def test_it_rejects_an_impossible_config(arguments: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        SelectorConfig(**arguments)


def test_it_rejects_a_candidate_without_weight() -> None:
    with pytest.raises(ValueError):
        Candidate("a", healthy("a"), weight=0.0)
