"""Threshold simulation: hard share and re-priced cost per threshold, from recorded scores and costs."""

from __future__ import annotations

import pytest

from audit.tuning import ScoreGroup, cost_per_token, histogram, simulate, threshold_range


def group(score: float, tier: str, count: int, tokens: int, cost: float, fixed: bool = False) -> ScoreGroup:
    return ScoreGroup(score=score, tier=tier, fixed=fixed, count=count, tokens=tokens, cost=cost, priced_tokens=tokens)


# Easy costs 1e-6 USD per token, hard 1e-5 (ten times more).
GROUPS = [
    group(1, "easy", count=10, tokens=10_000, cost=0.01),
    group(3, "easy", count=5, tokens=10_000, cost=0.01),
    group(5, "hard", count=4, tokens=2_000, cost=0.02),
    group(8, "hard", count=1, tokens=8_000, cost=0.08),
    group(0, "hard", count=2, tokens=1_000, cost=0.01, fixed=True),  # forced or pinned: stays hard
]


def test_cost_per_token_is_recorded_cost_over_recorded_tokens_per_tier() -> None:
    assert cost_per_token(GROUPS) == {"easy": pytest.approx(1e-6), "hard": pytest.approx(1e-5)}


@pytest.mark.parametrize(
    ("threshold", "hard", "cost", "repriced"),
    [
        # current threshold 4: nothing switches, the recorded total.
        (4, 7, 0.13, 0),
        # threshold 3: the score-3 easy group goes hard, re-priced at 1e-5 * 10,000 tokens = 0.10 instead of 0.01.
        (3, 12, 0.22, 5),
        # threshold 6: the score-5 hard group goes easy, re-priced at 1e-6 * 2,000 = 0.002 instead of 0.02.
        (6, 3, 0.112, 4),
        # threshold 9: the score-8 group too (8,000 tokens * 1e-6 = 0.008 instead of 0.08); fixed ones stay hard.
        (9, 2, 0.04, 5),
        # threshold 1: everything hard.
        (1, 22, 0.22 + 0.09, 15),
    ],
)
def test_each_threshold_gets_its_hard_share_and_repriced_cost(threshold: int, hard: int, cost: float,
                                                              repriced: int) -> None:
    [outcome] = simulate(GROUPS, [threshold], current=4)
    assert outcome.hard == hard
    assert outcome.total == 22
    assert outcome.hard_share == pytest.approx(hard / 22)
    assert outcome.cost_usd == pytest.approx(cost)
    assert outcome.repriced == repriced
    assert outcome.current is (threshold == 4)


def test_without_priced_traffic_in_the_other_tier_the_recorded_cost_is_kept() -> None:
    only_easy = [group(2, "easy", count=3, tokens=300, cost=0.003)]
    [outcome] = simulate(only_easy, [1], current=4)
    assert outcome.hard == 3
    assert outcome.cost_usd == pytest.approx(0.003)
    assert outcome.repriced == 0


def test_the_histogram_and_threshold_range_cover_the_scores_seen() -> None:
    scores, counts = histogram(GROUPS)
    assert scores == list(range(0, 9))
    assert counts["easy"][1] == 10
    assert counts["easy"][3] == 5
    assert counts["hard"][5] == 4
    assert counts["hard"][0] == 2
    assert threshold_range(GROUPS, current=4) == list(range(1, 10))
