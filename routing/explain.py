"""POST /v1/routing/explain: what the gateway would decide for a body, without calling upstream.

Nothing is changed by an explanation: the session pin is read, not written; round-robin positions and the
random generator are copies; no attempt is made.
"""

from __future__ import annotations

import copy
import random
import time
from typing import TYPE_CHECKING, Any

from routing.core.contracts import effective_contract
from routing.core.requirements import requirements_from_features
from routing.core.sessions import apply_tier_pin
from routing.errors import GatewayError
from routing.planning import PlanInputs, plan_targets
from routing.state import GatewayState, state
from routing.tiers import TIER_PIN_NAMESPACE, verdict_for

if TYPE_CHECKING:
    from routing.journey import Call


async def explain_call(call: Call) -> dict[str, Any]:
    from routing.engine import session_of

    table = call.table
    requested = call.features.model
    kind = table.kind_of(requested)
    if kind is None:
        raise GatewayError(404, f"The model `{requested}` does not exist or you do not have access to it.",
                           code="model_not_found", param="model")
    out: dict[str, Any] = {"model": requested, "kind": kind, "config_version": table.version}
    target, contract_name = requested, None
    session = session_of(call)
    out["session"] = {"source": session.source}
    if kind == "tier":
        route = table.tier_routes[requested]
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
        contract_name = route.contract
    if contract_name is None and target in table.virtual_models:
        contract_name = table.virtual_models[target].contract
    workload = call.headers.get("x-gomodel-workload", "").strip() or contract_name
    spec = table.contracts.get(workload) if workload else None
    contract = effective_contract(requirements_from_features(call.features), spec)
    shadow = GatewayState(health=state.health, round_robin=copy.deepcopy(state.round_robin),
                          rng=random.Random(0), selector_config=state.selector_config)
    now = time.monotonic()
    inputs = PlanInputs(table=table, contract=contract, session_targets={},
                        warm_target=state.warm.get(session.value, now), now=now)
    plan = plan_targets(target, inputs, shadow)
    out["target"] = target
    out["workload"] = contract.workload
    out["candidates"] = [m.name for m in plan.models]
    out["selections"] = [r.as_event() for r in plan.records]
    out["rejected"] = [{"target": t, "reason": r} for t, r in plan.rejected]
    if plan.retry_after_s is not None:
        out["all_cooling_retry_after_s"] = plan.retry_after_s
    return out
