"""Threshold tuning from recorded traffic: what share would go hard, and at what cost, for each threshold.

Method (also in docs/audit.md). Over the chosen window, tier-routed requests are grouped by score, recorded
tier, and whether the score decided the tier at all:

- a forced tier (``X-GoModel-Tier``), the reasoning shortcut, and a session already pinned hard decide the
  tier whatever the threshold, so those requests keep their tier and recorded cost;
- every other request would go hard under threshold ``t`` when ``score >= t``.

A request that keeps its tier keeps its recorded cost. A request that would switch tier is re-priced at the
other tier's average cost per token in the same window (recorded cost / recorded input+output tokens of
that tier's requests). Escalate-only pins are not replayed: a lower threshold would also pin more sessions
hard, so the hard share of a much lower threshold is a lower bound.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import BooleanField, Case, Count, F, Q, QuerySet, Sum, Value, When
from django.db.models.functions import Coalesce, TruncDay, TruncHour

from audit.models import AuditRevision

TIERS = ("easy", "hard")


@dataclass(frozen=True)
class ScoreGroup:
    """Requests that share a score, a recorded tier and whether the score decided the tier."""

    score: float
    tier: str
    fixed: bool
    count: int
    tokens: int
    cost: float
    priced_tokens: int  # tokens of the requests that have a recorded cost


@dataclass(frozen=True)
class ThresholdOutcome:
    threshold: int
    hard_share: float
    hard: int
    total: int
    cost_usd: float
    repriced: int
    current: bool


def score_groups(qs: QuerySet[AuditRevision]) -> list[ScoreGroup]:
    """Aggregate tier-routed revisions of ``qs`` into ScoreGroups (one GROUP BY query)."""
    fixed = Q(tier_forced=True) | Q(reasoning_shortcut=True) | Q(pin_before="hard")
    tokens = F("input_tokens") + F("output_tokens")
    rows = (
        qs.filter(tier__in=TIERS, score__isnull=False)
        .annotate(is_fixed=Case(When(fixed, then=Value(True)), default=Value(False), output_field=BooleanField()))
        .values("score", "tier", "is_fixed")
        .annotate(
            count=Count("id"),
            tokens=Coalesce(Sum(tokens), 0),
            cost=Coalesce(Sum("cost_usd"), 0.0),
            priced_tokens=Coalesce(Sum(tokens, filter=Q(cost_usd__isnull=False)), 0),
        )
        .order_by()
    )
    return [
        ScoreGroup(
            score=float(r["score"]),
            tier=r["tier"],
            fixed=bool(r["is_fixed"]),
            count=r["count"],
            tokens=int(r["tokens"]),
            cost=float(r["cost"]),
            priced_tokens=int(r["priced_tokens"]),
        )
        for r in rows
    ]


def cost_per_token(groups: Iterable[ScoreGroup]) -> dict[str, float | None]:
    """Average recorded cost per (input+output) token of each tier; None when the tier has no priced tokens."""
    cost = dict.fromkeys(TIERS, 0.0)
    tokens = dict.fromkeys(TIERS, 0)
    for g in groups:
        cost[g.tier] += g.cost
        tokens[g.tier] += g.priced_tokens
    return {tier: (cost[tier] / tokens[tier] if tokens[tier] else None) for tier in TIERS}


def simulate(groups: list[ScoreGroup], thresholds: Iterable[int], current: int | None) -> list[ThresholdOutcome]:
    """The hard share and estimated cost of the window's traffic under each threshold (see module doc)."""
    per_token = cost_per_token(groups)
    total = sum(g.count for g in groups)
    outcomes = []
    for t in thresholds:
        hard = 0
        cost = 0.0
        repriced = 0
        for g in groups:
            tier = g.tier if g.fixed else ("hard" if g.score >= t else "easy")
            if tier == "hard":
                hard += g.count
            price = per_token[tier]
            if tier == g.tier or price is None:
                cost += g.cost
            else:
                cost += g.tokens * price
                repriced += g.count
        outcomes.append(
            ThresholdOutcome(
                threshold=t,
                hard_share=hard / total if total else 0.0,
                hard=hard,
                total=total,
                cost_usd=cost,
                repriced=repriced,
                current=t == current,
            )
        )
    return outcomes


def threshold_range(groups: list[ScoreGroup], current: int | None) -> list[int]:
    """Thresholds worth showing: 1 up to just past the highest score seen (and the current one)."""
    top = max((g.score for g in groups), default=0.0)
    upper = max(int(math.floor(top)) + 1, current or 0, 4)
    return list(range(1, min(upper, 100) + 1))


def histogram(groups: list[ScoreGroup]) -> tuple[list[int], dict[str, list[int]]]:
    """Counts per integer score (floored, clamped at 0) and tier: (scores, {tier: counts})."""
    top = max((int(math.floor(max(0.0, g.score))) for g in groups), default=0)
    scores = list(range(0, min(top, 100) + 1))
    counts = {tier: [0] * len(scores) for tier in TIERS}
    for g in groups:
        index = min(int(math.floor(max(0.0, g.score))), len(scores) - 1)
        counts[g.tier][index] += g.count
    return scores, counts


@dataclass(frozen=True)
class Bucket:
    start: dt.datetime
    total: int
    easy: int
    hard: int
    fell_back: int
    accepted: int
    cost: float

    @property
    def fallback_rate(self) -> float | None:
        return self.fell_back / self.total if self.total else None

    @property
    def cost_per_accepted(self) -> float | None:
        return self.cost / self.accepted if self.accepted else None


def over_time(qs: QuerySet[AuditRevision], *, hourly: bool) -> list[Bucket]:
    """Per day (or hour): requests, tier split, fallbacks, accepted answers and cost."""
    trunc = TruncHour("created_at", tzinfo=dt.UTC) if hourly else TruncDay("created_at", tzinfo=dt.UTC)
    rows = (
        qs.annotate(bucket=trunc)
        .values("bucket")
        .annotate(
            total=Count("id"),
            easy=Count("id", filter=Q(tier="easy")),
            hard=Count("id", filter=Q(tier="hard")),
            fell_back=Count("id", filter=Q(fell_back=True)),
            accepted=Count("id", filter=Q(validation="accepted", status__gte=200, status__lt=300)),
            cost=Coalesce(Sum("cost_usd"), 0.0),
        )
        .order_by("bucket")
    )
    return [
        Bucket(
            start=r["bucket"],
            total=r["total"],
            easy=r["easy"],
            hard=r["hard"],
            fell_back=r["fell_back"],
            accepted=r["accepted"],
            cost=float(r["cost"]),
        )
        for r in rows
    ]
