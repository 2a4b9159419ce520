"""POST /v1/routing/explain: what the gateway would decide for a body, without calling upstream.

Nothing is changed by an explanation: the session pin is read, not written; round-robin positions and the
random generator are copies; no attempt is made. An embeddings request (``call.embeddings``) is explained as
the engine routes it, without a session, and each planned target is put through its translation
(``explain_embeddings``).
"""

from __future__ import annotations

import copy
import random
import time
from typing import Any

from routing.core.contracts import EffectiveContract
from routing.core.sessions import apply_tier_pin
from routing.core.table import CategoryRouteSpec, TierRouteSpec
from routing.gateway.categories import category_verdict
from routing.gateway.inspection.explain_embeddings import explain_embeddings
from routing.gateway.planning import PlanInputs, plan_targets
from routing.gateway.policies import choose_policy, policy_view, settle_policy
from routing.gateway.records import Call, CategoryDecision
from routing.gateway.resolve import admit, route_chain
from routing.gateway.responses_endpoint import continue_conversation
from routing.gateway.state import GatewayState, state
from routing.gateway.tier_escalation import CAPABILITY, capable_route
from routing.gateway.tiers import TIER_PIN_NAMESPACE, verdict_for


async def explain_call(call: Call) -> dict[str, Any]:
    """The verdict and candidate ranking a real request with this body and these headers would get.

    The same ``admit`` and ``route_chain`` as the engine decide access (403), unknown names (404), unknown
    workloads (400) and the target, so an explanation never shows what the request itself would be refused.
    """
    table = call.table
    requested = call.features.model
    embeddings = call.embeddings
    kind = admit(call, "embeddings" if embeddings is not None else "chat")
    await continue_conversation(call)  # a Responses body's stored conversation, read as the engine reads it
    policy = choose_policy(call)
    out: dict[str, Any] = {"model": requested, "kind": kind, "config_version": table.version,
                           "endpoint": call.endpoint}
    session = call.session
    if embeddings is None:  # embeddings keep no session (the engine's _plan says why)
        out["session"] = {"source": session.source}
    target, contract = await route_chain(call, kind, requested, _ExplainSteps(out))
    shadow = GatewayState(health=state.health, round_robin=copy.deepcopy(state.round_robin),
                          rng=random.Random(0),  # noqa: S311 - a copy for ranking, not cryptography
                          selector_config=state.selector_config, quotas=state.quotas)  # read, never counted
    now = time.monotonic()
    warm = state.warm.get(session.value, now) if embeddings is None else None
    inputs = PlanInputs(table=table, contract=contract, session_targets={}, warm_target=warm, now=now,
                        policy=policy)
    plan = plan_targets(target, inputs, shadow)
    settle_policy(policy, plan)
    out["policy"] = policy_view(policy)
    out["target"] = target
    out["workload"] = contract.workload
    out["candidates"] = [m.name for m in plan.models]
    out["selections"] = [r.as_event() for r in plan.records]
    for selection in out["selections"]:
        selection["exploration_targets"] = _exploration_targets(selection)
    out["rejected"] = [{"target": t, "reason": r} for t, r in plan.rejected]
    if embeddings is not None:
        candidates, refused, section = explain_embeddings(embeddings, table, plan.models)
        out["candidates"] = candidates
        out["rejected"] += refused
        out["embeddings"] = section
    if plan.retry_after_s is not None:
        out["all_cooling_retry_after_s"] = plan.retry_after_s
    return out


class _ExplainSteps:
    """The chain's steps for an explanation: the session pin read, never written, nothing counted, and each
    decision reported in ``out`` with what led to it (the verdict before the pin, the threshold, the pin)."""

    def __init__(self, out: dict[str, Any]) -> None:
        self.out = out

    def category(self, call: Call, route: CategoryRouteSpec) -> CategoryDecision:
        category = category_verdict(call, route)
        self.out["category"] = {**category.as_event(),
                                "long_context_tokens": call.table.settings.category_long_context_tokens}
        return category

    async def tier(self, call: Call, route: TierRouteSpec) -> str:
        settings = call.table.settings
        decision = verdict_for(call, route)
        pinned = await state.pins.get(TIER_PIN_NAMESPACE, f"{route.alias}|{call.session.value}")
        pin = apply_tier_pin(decision.tier, pinned)
        self.out["tier"] = {
            **decision.as_event(),
            "threshold": settings.smart_routing_threshold,
            "verdict_tier": decision.tier,
            "tier": pin.tier,
            "target": route.hard if pin.tier == "hard" else route.easy,
            "pin_before": pinned,
            "pinned": pin.pinned,
            "escalated": pin.escalated,
            "enabled": settings.smart_routing_enabled,
        }
        target: str = self.out["tier"]["target"]
        return target

    async def escalate(self, call: Call, route: TierRouteSpec, target: str, route_contract: str | None,
                       contract: EffectiveContract) -> tuple[str, EffectiveContract]:
        tier = self.out["tier"]
        if not tier["enabled"]:  # capability escalation, as the engine applies it
            return target, contract
        route = call.table.tier_routes[tier["alias"]]
        verdict, contract = await capable_route(call, route, tier["tier"], route_contract, contract)
        if verdict.escalated:
            target = route.hard if verdict.tier == "hard" else route.easy
            tier.update(tier=verdict.tier, target=target, escalation=CAPABILITY,
                        capability_missing={t: list(gap) for t, gap in verdict.missing.items()})
        return target, contract


def _exploration_targets(selection: dict[str, Any]) -> list[str]:
    """The targets the exploration share may draw for this selection: the healthy candidates with a weight,
    when there are two or more (the selector's own rule); empty when the share is 0 or nothing to explore."""
    if not selection.get("exploration"):
        return []
    healthy = [c["target"] for c in selection["candidates"] if c["status"] == "healthy" and c["weight"] > 0]
    return healthy if len(healthy) >= 2 else []
