"""Model strengths are free-form tags; a routing policy may select by a category or any tag a model carries."""

from __future__ import annotations

import pytest

from routing.core.categories import CATEGORIES, known_strengths, strength_tag_problem
from routing.core.policies import PolicySpec, TargetFacts, apply_policy, policy_problems


@pytest.mark.parametrize("tag", ["reasoning", "fast", "long_context", "tier-1", "GPU_2", "x" * 32])
def test_it_accepts_letters_digits_hyphens_and_underscores(tag: str) -> None:
    assert strength_tag_problem(tag) is None


@pytest.mark.parametrize("tag", ["", "two words", "café", "a/b", "x" * 33, 3, None])
def test_it_refuses_anything_else_as_a_tag(tag: object) -> None:
    problem = strength_tag_problem(tag)
    assert problem is not None
    assert "tag" in problem


def test_the_known_strengths_are_the_categories_then_the_carried_tags() -> None:
    assert known_strengths({"reasoning", "code", "fast"}) == (*CATEGORIES, "fast", "reasoning")


def test_a_policy_may_select_by_a_tag_some_model_carries() -> None:
    policies = {"think": {"strategy": "strength", "strength": "reasoning"}}
    assert policy_problems(policies, strengths=known_strengths({"reasoning"})) == []


def test_a_policy_naming_a_tag_no_model_carries_is_refused_with_the_nearest_tag() -> None:
    policies = {"think": {"strategy": "strength", "strength": "reasonin"}}
    [problem] = policy_problems(policies, strengths=known_strengths({"reasoning", "fast"}))
    assert problem.field == "strength"
    assert problem.message.startswith('unknown strength "reasonin": neither a category nor a tag a model carries.')
    assert "Did you mean `reasoning`?" in problem.message


def test_a_strength_policy_keeps_only_the_targets_with_the_tag() -> None:
    pool = (TargetFacts("quick", frozenset({"fast"}), None, None, True),
            TargetFacts("deep", frozenset({"reasoning", "analysis"}), None, None, True))
    outcome = apply_policy(PolicySpec("think", "strength", strength="reasoning"), {}, pool, virtual_model="vm")
    assert outcome.order == (1,)
    assert outcome.rejected == (("quick", "strength"),)
