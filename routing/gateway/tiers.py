"""Smart tier routing on the request path: classify, apply the session's escalate-only pin, pick the target.

Overrides: ``X-GoModel-Smart-Routing: off`` skips classification (the session's pinned tier is used, else
easy; the pin is not changed); ``X-GoModel-Tier: easy|hard`` forces the tier and leaves the pin alone.
With smart routing disabled (PRO_SMART_ROUTING_ENABLED=false) every request to a tier alias goes to its
easy target.
"""

from __future__ import annotations

from routing.core.classifier import classify
from routing.core.sessions import apply_tier_pin
from routing.core.table import TierRouteSpec
from routing.gateway.gateway_error import GatewayError
from routing.gateway.records import Call, TierDecision
from routing.gateway.state import state
from routing.ops import metrics

TIER_PIN_NAMESPACE = "tier"


def verdict_for(call: Call, route: TierRouteSpec) -> TierDecision:
    """The classifier's verdict alone (no pin, no overrides): what /v1/routing/explain shows first."""
    settings = call.table.settings
    verdict = classify(call.features, threshold=settings.smart_routing_threshold,
                       keywords=settings.smart_routing_keywords or None)
    target = route.hard if verdict.tier == "hard" else route.easy
    return TierDecision(alias=route.alias, tier=verdict.tier, target=target, score=verdict.score,
                        signals=verdict.signals, reasoning_shortcut=verdict.reasoning_shortcut)


def _forced_tier(call: Call) -> str | None:
    raw = call.headers.get("x-gomodel-tier", "").strip().lower()
    if not raw:
        return None
    if raw not in ("easy", "hard"):
        raise GatewayError(400, f"X-GoModel-Tier must be easy or hard, not `{raw[:40]}`.",
                           param="X-GoModel-Tier", error_class="permanent")
    return raw


async def decide_tier(call: Call, route: TierRouteSpec) -> TierDecision:
    settings = call.table.settings
    alias = route.alias
    forced = _forced_tier(call)
    bypass = call.headers.get("x-gomodel-smart-routing", "").strip().lower() == "off"
    decision = verdict_for(call, route)
    metrics.SMART_SCORE.labels(alias).observe(decision.score)

    if not settings.smart_routing_enabled:
        decision.tier, decision.bypassed = "easy", True
        decision.notes.append("smart routing disabled")
    elif forced is not None:
        decision.tier, decision.forced = forced, True
        metrics.SMART_OVERRIDES.labels(alias, f"forced_{forced}").inc()
    elif bypass:
        session = call.session
        pinned = await state.pins.get(TIER_PIN_NAMESPACE, f"{alias}|{session.value}")
        decision.pin_before = pinned
        decision.tier = pinned if pinned in ("easy", "hard") else "easy"
        decision.bypassed = True
        decision.pinned = pinned is not None
        metrics.SMART_OVERRIDES.labels(alias, "off").inc()
    else:
        session = call.session
        previous = await state.pins.escalate(TIER_PIN_NAMESPACE, f"{alias}|{session.value}", decision.tier,
                                             settings.smart_routing_session_ttl_s)
        pin = apply_tier_pin(decision.tier, previous)
        decision.pin_before = previous
        decision.pinned, decision.escalated = pin.pinned, pin.escalated
        if pin.tier == "hard" and decision.tier != "hard":
            metrics.SMART_ESCALATIONS.labels(alias, "pin").inc()
        elif decision.tier == "hard":
            metrics.SMART_ESCALATIONS.labels(alias, "score").inc()
        decision.tier = pin.tier

    decision.target = route.hard if decision.tier == "hard" else route.easy
    return decision  # counted in SMART_REQUESTS by the engine, once capability escalation has had its say
