"""One stored request's decision as plain JSON, for the admin's playground to show beside the answer it streamed.

The same facts as the one-request page (audit/views.py ``revision``), worded the same way where that page words
them (audit.decisions), so the playground and the auditor pages never disagree. Money is rounded as everywhere
(audit.money); no body, no prompt and no key secret is in it (the revision holds none of the last).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from audit import decisions
from audit.models import AttemptRecord, AuditRevision
from audit.money import usd


def _money(value: float | None) -> str:
    return "unknown" if value is None else usd(value)


def _attempt(attempt: AttemptRecord) -> dict[str, Any]:
    return {
        "seq": attempt.seq, "target": attempt.target, "provider": attempt.provider, "status": attempt.status,
        "error_class": attempt.error_class, "reason": attempt.reason, "action": attempt.action,
        "latency_ms": round(attempt.latency_ms, 1), "cost": _money(attempt.cost_usd),
        "outcome": _outcome(attempt),
    }


def _outcome(attempt: AttemptRecord) -> str:
    """What became of an attempt, in a word: answered, retried, fell back, failed."""
    if attempt.action in ("accepted", "returned_to_client") and attempt.status is not None and attempt.status < 300:
        return "answered"
    if attempt.action == "retry_same":
        return "retried"
    if attempt.action == "fallback":
        return "fell back"
    return attempt.action or "failed"


def decision_of(rev: AuditRevision, attempts: Sequence[AttemptRecord]) -> dict[str, Any]:
    """Who asked, for what, how it was routed, what every attempt did and what it cost."""
    limit = decisions.limit_refusal(rev)
    policy = decisions.policy_view(rev)
    return {
        "request_id": rev.request_id,
        "key": rev.key_name, "team": rev.team,
        "requested_model": rev.requested_model, "stream": rev.stream,
        "status": rev.status, "error_class": rev.error_class, "error_message": rev.error_message[:500],
        "tier": {"alias": rev.tier_alias, "tier": rev.tier, "target": rev.tier_target, "score": rev.score,
                 "forced": rev.tier_forced, "pinned": rev.tier_pinned, "escalated": rev.tier_escalated}
        if rev.tier else None,
        "category": {"alias": rev.category_alias, "category": rev.category, "rule": rev.category_rule,
                     "why": decisions.CATEGORY_RULES.get(rev.category_rule, ""), "target": rev.category_target}
        if rev.category else None,
        "policy": {"name": rev.policy, "chain": rev.policy_chain} if policy is not None or rev.policy else None,
        "virtual_model": rev.virtual_model, "strategy": rev.strategy, "selection_why": rev.selection_why,
        "target": rev.target,
        "limit": {"code": limit.code, "who": limit.who, "words": limit.words} if limit is not None else None,
        "attempts": [_attempt(a) for a in attempts],
        "fell_back": rev.fell_back,
        "latency_ms": round(rev.latency_ms, 1),
        "ttfb_ms": None if rev.ttfb_ms is None else round(rev.ttfb_ms, 1),
        "input_tokens": rev.input_tokens, "output_tokens": rev.output_tokens,
        "usage_estimated": rev.usage_estimated,
        "cost": _money(rev.cost_usd),
        "billed": _money(rev.billed_cost_usd) if rev.billed_cost_usd is not None else None,
    }
