"""The records of one request, in one module so every step of the gateway can share them without cycles.

``Call`` is what the client sent, as read once; ``Journey`` is everything decided while serving it (tier,
plan, attempts, answer), which feeds the response headers, the metrics and the audit event. The smaller
records (``TierDecision``, ``SelectionRecord``, ``Plan``, ``AttemptRecord``) are parts of a journey.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Django's, not functools': the same value kept in the instance's __dict__, without the class-wide lock that
# functools.cached_property takes on every first read on Python 3.11.
from django.utils.functional import cached_property

from routing.clients.limit_store import Admission
from routing.core.answer import Answer, Usage
from routing.core.classifier import Signal
from routing.core.contracts import EffectiveContract
from routing.core.embeddings import EmbeddingsRequest
from routing.core.features import Features
from routing.core.outcome import AttemptOutcome
from routing.core.policies import PolicySpec, PolicyStep, chain_label
from routing.core.selector import Selection
from routing.core.sessions import SessionId, detect_session
from routing.core.table import KeySpec, ModelSpec, RoutingTable
from routing.gateway.random_ids import random_id
from routing.providers.capabilities import required_capabilities
from routing.providers.errors import Inbound
from routing.providers.responses_api.calls import ResponsesCall


@dataclass
class Call:
    """One client request as the engine sees it."""

    request_id: str
    inbound: Inbound
    key: KeySpec | None
    body: dict[str, Any]
    features: Features
    headers: Mapping[str, str]  # lower-case names
    table: RoutingTable
    started: float = field(default_factory=time.monotonic)
    started_unix: float = field(default_factory=time.time)
    # Which endpoint: "chat" (chat completions, messages), "embeddings" (with its checked body), "responses" (with
    # its call: ``body`` is then the equivalent chat body, which routing reads) or "count_tokens"; the audit event
    # records it.
    endpoint: str = "chat"
    embeddings: EmbeddingsRequest | None = None
    responses: ResponsesCall | None = None

    @property
    def audit_endpoint(self) -> str:
        """The audit event's ``endpoint``: the chat shape ("openai", "anthropic") or the endpoint's name."""
        return self.inbound if self.endpoint == "chat" else self.endpoint

    @property
    def key_scope(self) -> int | str:
        return self.key.id if self.key is not None else "open"

    @cached_property
    def session(self) -> SessionId:
        """The request's session, detected on first use: a request for a concrete model never needs one."""
        return detect_session(self.features, self.headers, key_id=self.key_scope)

    @cached_property
    def needs(self) -> dict[str, str]:
        """What the body needs from a model (``required_capabilities``; for ``/v1/responses`` its chat
        equivalent): scanned once, for the tier's capability check and for every attempt's."""
        return required_capabilities(self.inbound, self.body)

    @property
    def detected_session(self) -> SessionId | None:
        """The session if a routing step needed it; the audit event records it but never detects one itself."""
        return self.__dict__.get("session")


@dataclass
class Journey:
    """Everything decided for one request; feeds the headers, the metrics and the audit event."""

    requested_model: str
    endpoint: str
    category: CategoryDecision | None = None
    policy: PolicyDecision | None = None
    tier: TierDecision | None = None
    target_name: str = ""
    contract: EffectiveContract | None = None
    plan: Plan | None = None
    attempts: list[AttemptRecord] = field(default_factory=list)
    answered_by: ModelSpec | None = None
    usage: Usage | None = None
    cost: float | None = None
    ttfb_s: float | None = None
    status: int = 200
    error_class: str | None = None
    error_message: str | None = None
    validation: str = "not_run"
    answer: Answer | None = None
    deadline_ms: int | None = None
    operation_id: str | None = None
    replay_blob: bytes | None = None  # what a repeat of this idempotent request gets back
    limits: Admission | None = None  # the key's and team's limits counted this request (routing.gateway.governance)
    limits_settled: bool = False
    limit_headers: dict[str, str] = field(default_factory=dict)  # OpenAI's x-ratelimit-* for a limited key
    limit_refused: str = ""  # "<key|team>:<rpm|tpm|concurrency|budget>" when a limit refused the request
    usage_estimated: bool = False  # the provider reported no usage: the tokens are the gateway's estimate
    cache: CacheDecision | None = None  # set for a request of a cached name (routing.gateway.response_cache)

    def headers(self, request_id: str) -> dict[str, str]:
        out = {"X-Request-Id": request_id}
        if self.category is not None:
            out["X-GoModel-Category"] = self.category.category
            out["X-GoModel-Category-Target"] = self.category.target
        if self.policy is not None:
            out["X-GoModel-Policy"] = self.policy.chain
        if self.tier is not None:
            out["X-GoModel-Pro-Tier"] = self.tier.tier
            out["X-GoModel-Pro-Tier-Target"] = self.tier.target
            out["X-GoModel-Pro-Tier-Score"] = str(self.tier.score)
            if self.tier.escalation:
                out["X-GoModel-Pro-Tier-Escalated"] = self.tier.escalation
        if self.answered_by is not None:
            out["X-GoModel-Target"] = self.answered_by.name
            if self.attempts and self.attempts[-1].thinking:
                out["X-GoModel-Thinking"] = self.attempts[-1].thinking
        elif self.cache is not None and self.cache.target:
            out["X-GoModel-Target"] = self.cache.target  # a hit: the model whose answer was kept
        out["X-GoModel-Attempts"] = str(len(self.attempts))
        if self.cost is not None:
            out["X-GoModel-Cost-Usd"] = f"{self.cost:.8f}"
        if self.usage_estimated:
            out["X-GoModel-Usage"] = "estimate"
        if self.operation_id:
            out["X-GoModel-Operation-Id"] = self.operation_id
        if self.limit_headers:
            out.update(self.limit_headers)
        if self.cache is not None:
            out["X-GoModel-Cache"] = self.cache.outcome
            if self.cache.similarity is not None:
                out["X-GoModel-Cache-Similarity"] = f"{self.cache.similarity:.4f}"
        return out


@dataclass
class CacheDecision:
    """What the response cache did for a request of a cached name: its outcome, and for a miss whether the answer
    is to be kept; for a hit, which request filled the entry and what its answer had cost."""

    name: str
    outcome: str  # "hit", "semantic-hit", "miss" or "bypass" (the X-GoModel-Cache header)
    key: str = ""
    scope: str = ""
    reason: str = ""  # why not read or not written: "off", "refresh", "no-cache", "no-store"
    write: bool = False
    filled_by: str = ""  # the request id that filled the entry (hits)
    target: str = ""  # the model that gave the kept answer (hits)
    saved_usd: float = 0.0
    similarity: float | None = None  # a semantic hit's
    # Semantic matching: the partition and the latest user turn's vector, for indexing the answer of a miss.
    partition: str = ""
    vector: list[float] | None = field(default=None, repr=False)

    def as_event(self) -> dict[str, Any]:
        return {"name": self.name, "outcome": self.outcome, "scope": self.scope, "reason": self.reason,
                "filled_by": self.filled_by, "saved_usd": self.saved_usd, "similarity": self.similarity}


@dataclass
class CategoryDecision:
    """A category route's decision: the request's category, the rule that decided it, and the target chosen."""

    alias: str
    category: str
    rule: str  # see routing.core.categories: header, attachments, context, code, keywords, notation, default
    detail: str
    target: str
    forced: bool = False

    def as_event(self) -> dict[str, Any]:
        return {"alias": self.alias, "category": self.category, "rule": self.rule, "detail": self.detail,
                "target": self.target, "forced": self.forced}


@dataclass
class PolicyDecision:
    """The routing policy of one request (routing.core.policies) and the fallback steps taken while planning.

    ``current`` starts as the selected policy and moves down its ``fallback_to`` chain when a virtual model has
    no qualifying target; the policy in force then stays in force for the rest of the request.
    """

    selected: PolicySpec
    source: str  # "header", "body" or "default"
    current: PolicySpec
    steps: list[PolicyStep] = field(default_factory=list)
    applied_to: list[str] = field(default_factory=list)  # the virtual models it decided at
    unmet: str = ""  # the unmet constraint(s) at the end of the chain, e.g. "max_cost_usd=0.01"

    @property
    def chain(self) -> str:
        """``fast`` without a step, ``fast>cheap>default`` with two: the X-GoModel-Policy header's value."""
        return chain_label(self.selected.name, self.steps)

    def as_event(self) -> dict[str, Any]:
        return {"selected": self.selected.name, "source": self.source, "policy": self.current.name,
                "strategy": self.current.strategy, "chain": self.chain,
                "steps": [step.as_event() for step in self.steps], "applied_to": list(self.applied_to),
                "unmet": self.unmet}


@dataclass
class TierDecision:
    alias: str
    tier: str
    target: str
    score: int
    signals: tuple[Signal, ...] = ()
    reasoning_shortcut: bool = False
    forced: bool = False
    bypassed: bool = False
    pinned: bool = False
    escalated: bool = False
    pin_before: str | None = None
    # Why the tier used is not the one the verdict and the pin chose: "capability" (routing.gateway.tier_escalation).
    escalation: str = ""
    notes: list[str] = field(default_factory=list)

    def as_event(self) -> dict[str, Any]:
        return {
            "alias": self.alias,
            "tier": self.tier,
            "target": self.target,
            "score": self.score,
            "signals": [{"name": s.name, "points": s.points, "detail": s.detail} for s in self.signals],
            "reasoning_shortcut": self.reasoning_shortcut,
            "forced": self.forced,
            "bypassed": self.bypassed,
            "pinned": self.pinned,
            "escalated": self.escalated,
            "pin_before": self.pin_before,
            "escalation": self.escalation,
        }


@dataclass
class SelectionRecord:
    """One virtual model's decision, for headers, metrics and the audit event."""

    virtual_model: str
    strategy: str
    selection: Selection | None  # None when a single eligible target made choosing unnecessary
    winner: str | None
    why: str
    skipped: list[tuple[str, str]] = field(default_factory=list)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    exploration: float = 0.0  # the adaptive exploration share in force for this selection (0: none)
    policy: str = ""  # the routing policy in force at this selection ("" without one)

    def as_event(self) -> dict[str, Any]:
        return {
            "virtual_model": self.virtual_model,
            "strategy": self.strategy,
            "winner": self.winner,
            "why": self.why,
            "explored": self.selection.explored if self.selection else False,
            "exploration": self.exploration,
            "policy": self.policy,
            "affinity": self.selection.affinity if self.selection else None,
            "candidates": self.candidates,
            "skipped": [{"target": t, "reason": r} for t, r in self.skipped],
        }


@dataclass
class Plan:
    models: list[ModelSpec] = field(default_factory=list)
    records: list[SelectionRecord] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (model, reason) from the contract filter
    retry_after_s: float | None = None  # every target is cooling down: when the first recovers
    limit_retry_after_s: float | None = None  # a model skipped at its provider's rpm/tpm: when it has room
    # (policy, virtual model, reasons) where no target qualified under the routing policy in force
    policy_unmet: tuple[str, str, tuple[str, ...]] | None = None


@dataclass
class AttemptRecord:
    """What the audit event and the headers say about one attempt."""

    seq: int
    target: str
    provider: str
    attempt_id: str = field(default_factory=random_id)
    started: float = field(default_factory=time.monotonic)  # when it was begun (its trace span's start)
    outcome: AttemptOutcome | None = None
    ttfb_s: float | None = None
    usage: Usage | None = None
    cost: float | None = None
    action: str = "accepted"
    validation: str = "not_run"
    health: dict[str, Any] | None = None
    error_message: str | None = None
    usage_estimated: bool = False  # the provider's usage never arrived whole: the gateway estimated it
    # "off": thinking was asked for but sent off, the final tool turn having lost Claude's signed thinking
    # (routing.providers.common.thinking_turns); "" otherwise.
    thinking: str = ""

    def as_event(self) -> dict[str, Any]:
        outcome = self.outcome
        return {
            "attempt_id": self.attempt_id,
            "seq": self.seq,
            "target": self.target,
            "provider": self.provider,
            "status": outcome.status if outcome else None,
            "error_class": str(outcome.error_class) if outcome and outcome.error_class else None,
            "reason": outcome.reason if outcome else "ok",
            # Whose failure it was (routing.core.outcome.Cause): "target" exactly when it counted against the
            # target's health; "client" when the request caused it (its deadline, its max_tokens, what it asked for).
            "caused_by": outcome.cause if outcome else None,
            "latency_ms": round(outcome.latency_s * 1000, 2) if outcome else None,
            "ttfb_ms": None if self.ttfb_s is None else round(self.ttfb_s * 1000, 2),
            "usage": usage_dict(self.usage),
            "cost_usd": self.cost,
            "usage_estimated": self.usage_estimated,
            "thinking": self.thinking or None,
            "action": self.action,
            "validation": self.validation,
            "health": self.health,
        }


def usage_dict(usage: Usage | None) -> dict[str, int]:
    usage = usage or Usage()
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cached_input_tokens": usage.cached_input_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
    }
