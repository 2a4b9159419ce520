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

from routing.core.sessions import apply_tier_pin
from routing.gateway.categories import category_verdict
from routing.gateway.inspection.explain_embeddings import explain_embeddings
from routing.gateway.planning import PlanInputs, plan_targets
from routing.gateway.policies import choose_policy, policy_view, settle_policy
from routing.gateway.records import Call
from routing.gateway.resolve import admit, request_contract
from routing.gateway.responses_endpoint import continue_conversation
from routing.gateway.state import GatewayState, state
from routing.gateway.tier_escalation import CAPABILITY, capable_route
from routing.gateway.tiers import TIER_PIN_NAMESPACE, verdict_for


async def explain_call(call: Call) -> dict[str, Any]:
    """The verdict and candidate ranking a real request with this body and these headers would get.

    The same ``admit`` and ``request_contract`` steps as the engine decide access (403), unknown names (404)
    and unknown workloads (400), so an explanation never shows what the request itself would be refused.
    """
    table = call.table
    requested = call.features.model
    embeddings = call.embeddings
    kind = admit(call, "embeddings" if embeddings is not None else "chat")
    await continue_conversation(call)  # a Responses body's stored conversation, read as the engine reads it
    policy = choose_policy(call)
    out: dict[str, Any] = {"model": requested, "kind": kind, "config_version": table.version,
                           "endpoint": call.endpoint}
    target, route_contract = requested, None
    session = call.session
    if embeddings is None:  # embeddings keep no session (the engine's _plan says why)
        out["session"] = {"source": session.source}
    if kind == "category":
        category_route = table.category_routes[requested]
        category = category_verdict(call, category_route)
        out["category"] = {**category.as_event(),
                           "long_context_tokens": table.settings.category_long_context_tokens}
        target, route_contract = category.target, category_route.contract
        # A tier alias as the category's target is explained as a request to that alias.
        kind = "tier" if table.kind_of(target) == "tier" else "resolved"
    if kind == "tier":
        route = table.tier_routes[target]
        decision = verdict_for(call, route)
        pinned = await state.pins.get(TIER_PIN_NAMESPACE, f"{route.alias}|{session.value}")
        pin = apply_tier_pin(decision.tier, pinned)
        out["tier"] = {
            **decision.as_event(),
            "threshold": table.settings.smart_routing_threshold,
            "verdict_tier": decision.tier,
            "tier": pin.tier,
            "target": route.hard if pin.tier == "hard" else route.easy,
            "pin_before": pinned,
            "pinned": pin.pinned,
            "escalated": pin.escalated,
            "enabled": table.settings.smart_routing_enabled,
        }
        target = out["tier"]["target"]
        route_contract = route_contract or route.contract
    contract = await request_contract(call, target, route_contract)
    tier = out.get("tier")
    if tier is not None and tier["enabled"]:  # capability escalation, as the engine applies it
        route = table.tier_routes[tier["alias"]]
        verdict, contract = await capable_route(call, route, tier["tier"], route_contract, contract)
        if verdict.escalated:
            target = route.hard if verdict.tier == "hard" else route.easy
            tier.update(tier=verdict.tier, target=target, escalation=CAPABILITY,
                        capability_missing={t: list(gap) for t, gap in verdict.missing.items()})
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


def _exploration_targets(selection: dict[str, Any]) -> list[str]:
    """The targets the exploration share may draw for this selection: the healthy candidates with a weight,
    when there are two or more (the selector's own rule); empty when the share is 0 or nothing to explore."""
    if not selection.get("exploration"):
        return []
    healthy = [c["target"] for c in selection["candidates"] if c["status"] == "healthy" and c["weight"] > 0]
    return healthy if len(healthy) >= 2 else []
