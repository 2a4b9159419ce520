"""The decisions a revision records, worded for the one-request page: the limit that refused it, the routing
policy and its fallback steps, how the winner was drawn, and why a skipped target was skipped.

Pure functions of a stored AuditRevision (no query): the page shows a section only when its value here is not
None. The codes stay visible next to their wording, so an auditor can search the docs and metrics for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from audit.models import AuditRevision

# The limits a key or team may set (routing.core.limits.LIMIT_NAMES), as the 429's message words them.
LIMIT_WORDS = {
    "rpm": "requests per minute",
    "tpm": "tokens per minute",
    "concurrency": "requests in flight at once",
    "budget": "spend budget",
}
# Why a candidate was skipped, for the codes that are not self-explaining.
SKIP_WORDS = {
    "at_provider_rpm": "its provider's requests-per-minute limit is used up",
    "at_provider_tpm": "its provider's tokens-per-minute limit is used up",
    "probe_busy": "recovering, and its one probe request is in flight",
}
# Why no target qualified under a routing policy (routing.core.policies' UNMET_* and UNAVAILABLE).
POLICY_REASON_WORDS = {
    "strength": "none is strong at the request's category",
    "max_latency_ms": "none is within the latency bound",
    "max_cost_usd": "none is within the cost bound",
    "unavailable": "none is available",
}
# The rules of a category route (routing.core.categories), in the order they are tried.
CATEGORY_RULES = {
    "header": "the X-GoModel-Category header named it",
    "attachments": "the request carries an image",
    "context": "the estimated input reaches the long-context threshold",
    "code": "the conversation shows code or diagnostics",
    "keywords": "a keyword of the category in the latest user message",
    "notation": "math notation in the latest user message",
    "default": "no other rule fired",
}
POLICY_SOURCES = {
    "header": "the X-Routing-Policy header",
    "body": "the body's metadata.routing_policy",
    "default": "the policy named default",
}


@dataclass(frozen=True)
class LimitRefusal:
    code: str  # "key:rpm"
    scope: str  # "key" or "team"
    who: str  # the key's or the team's name ("" when the revision does not name it)
    limit: str  # "rpm"
    words: str  # "requests per minute"


def limit_refusal(rev: AuditRevision) -> LimitRefusal | None:
    """The limit that refused the request with a 429, or None when none did."""
    if not rev.limit_refused:
        return None
    scope, _, limit = rev.limit_refused.partition(":")
    who = rev.team if scope == "team" else rev.key_name if scope == "key" else ""
    return LimitRefusal(code=rev.limit_refused, scope=scope, who=who, limit=limit,
                        words=LIMIT_WORDS.get(limit, limit))


@dataclass(frozen=True)
class PolicyStep:
    from_policy: str
    to_policy: str
    virtual_model: str
    reasons: list[tuple[str, str]]  # (code, words)


@dataclass(frozen=True)
class PolicyView:
    selected: str
    source: str  # words: where the policy came from
    in_force: str
    strategy: str
    chain: str
    steps: list[PolicyStep]
    applied_to: list[str]
    unmet: str


def _reasons(text: str) -> list[tuple[str, str]]:
    codes = [part.strip() for part in text.split(",") if part.strip()]
    return [(code, POLICY_REASON_WORDS.get(code, "")) for code in codes]


def policy_view(rev: AuditRevision) -> PolicyView | None:
    """The routing policy decision, or None when the request had no policy."""
    detail: dict[str, Any] = rev.policy_detail if isinstance(rev.policy_detail, dict) else {}
    if not (rev.policy or detail.get("selected") or detail.get("policy")):
        return None  # rows stored before the event kept an empty policy empty hold a decision of empty names
    raw_steps = detail.get("steps") if isinstance(detail.get("steps"), list) else []
    steps = [
        PolicyStep(from_policy=str(s.get("from") or ""), to_policy=str(s.get("to") or ""),
                   virtual_model=str(s.get("virtual_model") or ""), reasons=_reasons(str(s.get("reason") or "")))
        for s in raw_steps if isinstance(s, dict)
    ]
    source = str(detail.get("source") or "")
    applied = detail.get("applied_to") if isinstance(detail.get("applied_to"), list) else []
    return PolicyView(
        selected=str(detail.get("selected") or rev.policy),
        source=POLICY_SOURCES.get(source, source),
        in_force=rev.policy or str(detail.get("policy") or ""),
        strategy=str(detail.get("strategy") or ""),
        chain=rev.policy_chain,
        steps=steps,
        applied_to=[str(v) for v in applied],
        unmet=str(detail.get("unmet") or ""),
    )


@dataclass(frozen=True)
class WinnerDraw:
    explored: bool  # the exploration share drew the winner
    exploration: float  # the share in force (0: none)
    cold_start: bool  # the winner had too few latency samples to be judged
    observations: int | None

    @property
    def share(self) -> str:
        """The exploration share as a percentage: "1%", "0.5%"."""
        return f"{self.exploration * 100:.4g}%"


def winner_draw(rev: AuditRevision, winner: str) -> WinnerDraw | None:
    """How the winner was drawn when exploration or cold start played a part, else None."""
    candidate = next((c for c in rev.candidates or [] if isinstance(c, dict) and c.get("target") == winner), {})
    cold_start = bool(candidate.get("cold_start"))
    exploration = rev.exploration or 0.0
    if not (rev.explored or cold_start or exploration > 0):
        return None
    observations = candidate.get("observations")
    return WinnerDraw(explored=rev.explored, exploration=exploration, cold_start=cold_start,
                      observations=observations if isinstance(observations, int) else None)


def skipped(rev: AuditRevision) -> list[tuple[str, str, str]]:
    """The skipped candidates as (target, reason code, words; "" when the code says it all)."""
    return [(str(s.get("target") or ""), str(s.get("reason") or ""), SKIP_WORDS.get(str(s.get("reason")), ""))
            for s in rev.skipped or [] if isinstance(s, dict)]


def capability_detail(rev: AuditRevision) -> str:
    """What the capability escalation's signal says the tier lacked ("normal-easy lacks image"), or ""."""
    if rev.tier_escalation != "capability":
        return ""
    return next((str(s.get("detail") or "") for s in rev.signals or []
                 if isinstance(s, dict) and s.get("name") == "capability"), "")
