"""The resolve step, shared by a real request and ``/v1/routing/explain`` so the two can never drift.

``admit`` decides whether the key may use the requested name at all (404 unknown, with the nearest names the key
may use; 403 not allowed);
``request_contract`` decides what the request must meet once its target is known: the workload contract
(from ``X-GoModel-Workload``, the tier route or the virtual model), merged with what the body needs, and a
valid response schema. Both raise ``GatewayError`` exactly as the engine answers it.
``route_chain`` runs the steps between them in their one order: a category alias to its target, a tier alias to
its tier's target, the contract, then capability escalation; what a real request and an explanation do at each
step differs (a request writes the session pin and counts metrics, an explanation only reads and reports), so
each passes its own ``ChainSteps``.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from routing.core.contracts import EffectiveContract, effective_contract
from routing.core.names import did_you_mean
from routing.core.requirements import requirements_from_features
from routing.core.table import CategoryRouteSpec, TierRouteSpec
from routing.gateway.gateway_error import GatewayError
from routing.gateway.records import Call, CategoryDecision
from routing.schema.engine import schema_is_compiled, schema_problems

WORKLOAD_HEADER = "x-gomodel-workload"


def admit(call: Call, endpoint: str = "chat") -> str:
    """The kind of the requested name ("model", "virtual" or "tier"), once the key may use it for ``endpoint``."""
    requested = call.features.model
    kind = call.table.kind_of(requested)
    key = call.key
    if kind is None:
        # The nearest names this key may use (never one it may not: a suggestion must not reveal the catalogue).
        usable = [name for name in call.table.public_names() if key is None or key.allows(name)]
        hint = did_you_mean(requested[:200], usable)
        raise GatewayError(404, f"The model `{requested[:200]}` does not exist or you do not have access to it."
                                f"{hint}", code="model_not_found", param="model", error_class="permanent")
    if key is not None and not key.allows(requested):
        whose = "This key"
        if key.team is not None and key.team.allowed_models and requested not in key.team.allowed_models:
            whose = f"The team `{key.team.name}` of this key"
        raise GatewayError(403, f"{whose} is not allowed to use the model `{requested}`.",
                           code="model_not_allowed", param="model", error_class="permanent")
    served = call.table.endpoints_of(requested)
    if served and endpoint not in served:  # nothing enabled behind it: the plan answers that (no_target)
        # The Responses endpoint is served by chat models: its message names both.
        asked = "responses endpoint (served by chat models)" if call.endpoint == "responses" else f"{endpoint} endpoint"
        raise GatewayError(400, f"The model `{requested}` does not serve the {asked} (it serves: "
                                f"{', '.join(sorted(served))}).", code="unsupported_endpoint", param="model",
                           error_class="permanent")
    return kind


async def request_contract(call: Call, target: str, route_contract: str | None) -> EffectiveContract:
    """What the request must meet on its way to ``target``; a tier route's contract comes before the
    virtual model's, and an explicit ``X-GoModel-Workload`` before both.

    A response schema the gateway has not compiled yet is checked in a worker thread: checking it against
    the meta-schema costs about 0.2 ms per property, and a client's thousand-property schema must not hold
    the event loop (and every stream on it). A schema seen before is a cache hit and stays on the loop.
    """
    table = call.table
    contract_name = route_contract
    if contract_name is None and target in table.virtual_models:
        contract_name = table.virtual_models[target].contract
    workload = call.headers.get(WORKLOAD_HEADER, "").strip()
    if workload:
        spec = table.contracts.get(workload)
        if spec is None:
            raise GatewayError(400, f"Unknown workload `{workload[:80]}` in X-GoModel-Workload.",
                               code="unknown_workload", param="X-GoModel-Workload", error_class="permanent")
    else:
        spec = table.contracts.get(contract_name) if contract_name else None
    schema = call.features.output_schema
    if schema is not None:
        problems = schema_problems(schema) if schema_is_compiled(schema) else await asyncio.to_thread(
            schema_problems, schema)
        if problems:
            raise GatewayError(400, f"The JSON schema of the response format is invalid: {problems[0]}",
                               param="response_format", error_class="permanent")
    return effective_contract(requirements_from_features(call.features), spec)


class ChainSteps(Protocol):
    """What the engine and explain each do at a step of ``route_chain``."""

    def category(self, call: Call, route: CategoryRouteSpec) -> CategoryDecision:
        """The category decision for a category alias."""
        ...

    async def tier(self, call: Call, route: TierRouteSpec) -> str:
        """Decide the tier of a tier alias; the target of the tier decided."""
        ...

    async def escalate(self, call: Call, route: TierRouteSpec, target: str, route_contract: str | None,
                       contract: EffectiveContract) -> tuple[str, EffectiveContract]:
        """Capability escalation of the tier decided: the target and contract to plan with."""
        ...


async def route_chain(call: Call, kind: str, requested: str,
                      steps: ChainSteps) -> tuple[str, EffectiveContract]:
    """The target and contract of a request to ``requested`` (of ``kind``, as ``admit`` answered)."""
    target, route_contract = requested, None
    if kind == "category":
        category_route = call.table.category_routes[target]
        category = steps.category(call, category_route)
        target, route_contract = category.target, category_route.contract
        # A tier alias as the category's target: the tier is decided as for a request to that alias.
        kind = "tier" if call.table.kind_of(target) == "tier" else "resolved"
    tier_route = None
    if kind == "tier":
        tier_route = call.table.tier_routes[target]
        target = await steps.tier(call, tier_route)
        route_contract = route_contract or tier_route.contract
    contract = await request_contract(call, target, route_contract)
    if tier_route is not None:  # a tier that cannot serve the request hands it to the other tier
        target, contract = await steps.escalate(call, tier_route, target, route_contract, contract)
    return target, contract
