"""Routing policies in the pure core: each strategy's order, the constraints, fallback chains and their checks."""

from __future__ import annotations

from routing.core.categories import CATEGORIES
from routing.core.policies import (
    PolicySpec,
    TargetFacts,
    apply_policy,
    chain_label,
    order_targets,
    policy_problems,
    unmet_reason,
)


def facts(name: str, *, strengths: tuple[str, ...] = (), cost: float | None = None, latency_ms: float | None = None,
          available: bool = True) -> TargetFacts:
    return TargetFacts(name, frozenset(strengths), cost, None if latency_ms is None else latency_ms / 1000,
                       available)


POOL = (
    facts("a", strengths=("writing",), cost=0.030, latency_ms=900),
    facts("b", strengths=("code",), cost=0.002, latency_ms=300),
    facts("c", strengths=("code", "math"), cost=None, latency_ms=None),
    facts("d", strengths=("code",), cost=0.010, latency_ms=120),
)


def names(order: tuple[int, ...], pool: tuple[TargetFacts, ...] = POOL) -> list[str]:
    return [pool[i].name for i in order]


def decide(policy: PolicySpec, pool: tuple[TargetFacts, ...] = POOL, *others: PolicySpec):  # type: ignore[no-untyped-def]
    table = {p.name: p for p in (policy, *others)}
    return apply_policy(policy, table, pool, virtual_model="vm")


def test_it_orders_priority_as_declared() -> None:
    outcome = decide(PolicySpec("p", "priority"))
    assert names(outcome.order) == ["a", "b", "c", "d"]
    assert not outcome.keep_strategy
    assert not outcome.steps
    assert not outcome.unmet


def test_it_orders_cost_cheapest_first_with_unpriced_last() -> None:
    assert names(decide(PolicySpec("cheap", "cost")).order) == ["b", "d", "a", "c"]


def test_it_orders_latency_fastest_first_with_unmeasured_last() -> None:
    assert names(decide(PolicySpec("fast", "latency")).order) == ["d", "b", "a", "c"]


def test_the_strength_strategy_keeps_only_targets_with_the_strength_and_the_virtual_models_order() -> None:
    outcome = decide(PolicySpec("coder", "strength", strength="code"))
    assert names(outcome.order) == ["b", "c", "d"]
    assert outcome.keep_strategy
    assert outcome.rejected == (("a", "strength"),)


def test_constraints_filter_targets_unknown_values_are_not_held_against_them() -> None:
    outcome = decide(PolicySpec("fast", "latency", max_latency_ms=500))
    assert names(outcome.order) == ["d", "b", "c"]  # c was never measured
    assert outcome.rejected == (("a", "max_latency_ms"),)
    outcome = decide(PolicySpec("cheap", "cost", max_cost_usd=0.01))
    assert names(outcome.order) == ["b", "d", "c"]  # c is unpriced
    assert outcome.rejected == (("a", "max_cost_usd"),)
    assert unmet_reason(PolicySpec("x", "cost", strength="math", max_cost_usd=0.0001), POOL[1]) == "strength"


def test_a_policy_no_target_meets_falls_back_along_the_chain_and_says_why() -> None:
    pool = (facts("a", strengths=("writing",), cost=0.030, latency_ms=900),
            facts("b", strengths=("code",), cost=0.002, latency_ms=300))
    strict = PolicySpec("strict", "latency", max_latency_ms=50, fallback_to="cheap")
    cheap = PolicySpec("cheap", "cost", strength="writing", max_cost_usd=0.001, fallback_to="default")
    default = PolicySpec("default", "priority")
    outcome = decide(strict, pool, cheap, default)
    assert outcome.policy.name == "default"
    assert [(s.from_policy, s.to_policy, s.reason) for s in outcome.steps] == [
        ("strict", "cheap", "max_latency_ms"),
        ("cheap", "default", "max_cost_usd, strength"),
    ]
    assert chain_label("strict", outcome.steps) == "strict>cheap>default"
    assert names(outcome.order, pool) == ["a", "b"]


def test_the_step_reasons_name_the_constraints_that_failed() -> None:
    pool = (facts("a", latency_ms=900), facts("b", latency_ms=700))
    fast = PolicySpec("fast", "latency", max_latency_ms=500, fallback_to="any")
    outcome = decide(fast, pool, PolicySpec("any", "priority"))
    assert [(s.from_policy, s.to_policy, s.virtual_model, s.reason) for s in outcome.steps] == [
        ("fast", "any", "vm", "max_latency_ms")]
    assert outcome.policy.name == "any"
    assert names(outcome.order, pool) == ["a", "b"]


def test_targets_that_qualify_but_are_all_cooling_take_the_fallback() -> None:
    pool = (facts("a", latency_ms=100, available=False), facts("b", latency_ms=900))
    fast = PolicySpec("fast", "latency", max_latency_ms=500, fallback_to="any")
    outcome = decide(fast, pool, PolicySpec("any", "latency"))
    assert outcome.steps[0].reason == "max_latency_ms, unavailable"
    assert names(outcome.order, pool) == ["a", "b"]


def test_at_the_end_of_the_chain_cooling_targets_are_kept_for_the_cooldown_answer() -> None:
    pool = (facts("a", latency_ms=100, available=False), facts("b", latency_ms=900))
    outcome = decide(PolicySpec("fast", "latency", max_latency_ms=500), pool)
    assert not outcome.unmet
    assert names(outcome.order, pool) == ["a"]


def test_no_target_meeting_the_last_policy_is_unmet() -> None:
    pool = (facts("a", cost=0.5), facts("b", cost=0.2))
    outcome = decide(PolicySpec("cheap", "cost", max_cost_usd=0.1), pool)
    assert outcome.unmet
    assert outcome.order == ()
    assert outcome.rejected == (("a", "max_cost_usd"), ("b", "max_cost_usd"))
    assert outcome.policy.constraints == "max_cost_usd=0.1"


def test_the_walk_never_visits_a_policy_twice_even_in_a_cycle_that_slipped_through() -> None:
    pool = (facts("a", cost=0.5),)
    one = PolicySpec("one", "cost", max_cost_usd=0.1, fallback_to="two")
    two = PolicySpec("two", "cost", max_cost_usd=0.1, fallback_to="one")
    outcome = decide(one, pool, two)
    assert outcome.unmet
    assert chain_label("one", outcome.steps) == "one>two"


def test_checks_name_cycles_unknown_fallbacks_and_bad_fields() -> None:
    problems = policy_problems({
        "fast": {"strategy": "latency", "max_latency_ms": 500, "fallback_to": "cheap"},
        "cheap": {"strategy": "cost", "fallback_to": "fast"},
        "self": {"strategy": "priority", "fallback_to": "self"},
        "lost": {"strategy": "priority", "fallback_to": "nowhere"},
        "odd": {"strategy": "random", "strength": "poetry", "max_cost_usd": 0},
        "coder": {"strategy": "strength"},
        "ok": {"strategy": "cost", "max_cost_usd": 0.5, "fallback_to": "coder"},
    }, strengths=CATEGORIES)
    found = {(p.policy, p.field): p.message for p in problems}
    assert found[("fast", "fallback_to")] == "cycle: fast -> cheap -> fast"
    assert found[("cheap", "fallback_to")] == "cycle: cheap -> fast -> cheap"
    assert found[("self", "fallback_to")] == "cycle: self -> self"
    assert found[("lost", "fallback_to")] == 'unknown policy "nowhere"'
    assert found[("odd", "strategy")].startswith('unknown strategy "random"')
    assert found[("odd", "strength")].startswith('unknown strength "poetry"')
    assert found[("odd", "max_cost_usd")] == "must be a number greater than 0, got 0"
    assert found[("coder", "strength")] == "the strength strategy needs a strength"
    assert not [p for p in problems if p.policy == "ok"]


def test_a_chain_longer_than_the_limit_is_refused() -> None:
    policies: dict[str, dict[str, object]] = {f"p{i}": {"strategy": "priority", "fallback_to": f"p{i + 1}"}
                                             for i in range(20)}
    policies["p20"] = {"strategy": "priority"}
    problems = policy_problems(policies, strengths=CATEGORIES)
    assert problems
    assert "longer than 16" in problems[0].message


def test_order_targets_keeps_declared_order_on_ties() -> None:
    pool = (facts("a", cost=0.1), facts("b", cost=0.1), facts("c", cost=0.05))
    assert names(order_targets(PolicySpec("c", "cost"), pool, [0, 1, 2]), pool) == ["c", "a", "b"]
