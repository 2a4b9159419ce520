"""Routing policies on the request path: which policy a request is under, and what it does at a virtual model.

``X-Routing-Policy: NAME`` selects a policy, else ``metadata.routing_policy`` in the body, else the policy named
``default`` when one is configured; an unknown name is a 400 naming the header (or the body field). The body
field is the gateway's own: it is taken out of ``metadata`` before the body goes upstream.

At each virtual model the request resolves through (directly, or behind a tier or category route), the planner
hands its candidates to ``policy_candidates``: the pure walk in ``routing.core.policies`` filters them by the
policy's constraints, falls back along ``fallback_to`` when none qualifies, and orders them. No request without
a policy comes here, so the selector's hot path is unchanged for them.
"""

from __future__ import annotations

import math

from routing.core.contracts import EffectiveContract, estimate_cost_usd
from routing.core.policies import (
    DEFAULT_POLICY,
    POLICY_BODY_FIELD,
    POLICY_HEADER,
    UNMET_LATENCY,
    TargetFacts,
    apply_policy,
)
from routing.core.selector import Candidate
from routing.core.table import RoutingTable
from routing.gateway.gateway_error import GatewayError
from routing.gateway.records import Call, Plan, PolicyDecision, SelectionRecord
from routing.gateway.state import GatewayState
from routing.ops.policy_metrics import POLICY_DECISIONS, POLICY_FALLBACK_STEPS

# The strategy the selector runs over the policy's order: "failover" tries the targets in the order given.
ORDERED = "failover"


def choose_policy(call: Call) -> PolicyDecision | None:
    """The policy this request is under (None: no policy), or a 400 for an unknown name."""
    policies = call.table.policies
    header = call.headers.get(POLICY_HEADER, "").strip()
    from_body = _body_policy(call)
    if header:
        name, source, param = header, "header", "X-Routing-Policy"
    elif from_body is not None:
        name, source, param = from_body, "body", f"metadata.{POLICY_BODY_FIELD}"
    else:
        default = policies.get(DEFAULT_POLICY)
        return None if default is None else PolicyDecision(selected=default, source="default", current=default)
    policy = policies.get(name)
    if policy is None:
        known = ", ".join(sorted(policies)) or "none is configured"
        raise GatewayError(400, f"Unknown routing policy `{name[:80]}` in {param} (known: {known}).",
                           code="unknown_routing_policy", param=param, error_class="permanent")
    return PolicyDecision(selected=policy, source=source, current=policy)


def _body_policy(call: Call) -> str | None:
    """``metadata.routing_policy`` of the body, taken out of it (providers never see it); None when absent."""
    metadata = call.body.get("metadata")
    if not isinstance(metadata, dict) or POLICY_BODY_FIELD not in metadata:
        return None
    value = metadata[POLICY_BODY_FIELD]
    rest = {key: item for key, item in metadata.items() if key != POLICY_BODY_FIELD}
    if rest:
        call.body["metadata"] = rest
    else:
        del call.body["metadata"]
    if not isinstance(value, str) or not value.strip():
        raise GatewayError(400, f"metadata.{POLICY_BODY_FIELD} must be the name of a routing policy.",
                           code="unknown_routing_policy", param=f"metadata.{POLICY_BODY_FIELD}",
                           error_class="permanent")
    return value.strip()


def policy_candidates(
    virtual_model: str,
    candidates: list[Candidate],
    *,
    decision: PolicyDecision,
    table: RoutingTable,
    contract: EffectiveContract,
    state: GatewayState,
    now: float,
    plan: Plan,
    record: SelectionRecord,
) -> tuple[list[Candidate], str | None]:
    """The candidates the policy in force allows at ``virtual_model``, in its order, and the strategy the selector
    runs over them (None: the virtual model's own). Empty when none qualifies (``plan.policy_unmet`` says why)."""
    facts = [_facts(candidate, table, contract, state, now) for candidate in candidates]
    outcome = apply_policy(decision.current, table.policies, facts, virtual_model=virtual_model)
    decision.steps.extend(outcome.steps)
    decision.current = outcome.policy
    decision.applied_to.append(virtual_model)
    record.policy = outcome.policy.name
    record.skipped.extend((name, f"policy:{reason}") for name, reason in outcome.rejected)
    if outcome.unmet:
        reasons = tuple(dict.fromkeys(reason for _name, reason in outcome.rejected))
        decision.unmet = outcome.policy.constraints
        record.why = f"routing policy {outcome.policy.name}: no target meets {outcome.policy.constraints}"
        if plan.policy_unmet is None:
            plan.policy_unmet = (outcome.policy.name, virtual_model, reasons)
        return [], None
    allowed = [candidates[index] for index in outcome.order]
    return allowed, None if outcome.keep_strategy else ORDERED


def _facts(candidate: Candidate, table: RoutingTable, contract: EffectiveContract, state: GatewayState,
           now: float) -> TargetFacts:
    """What the policy reads of one candidate; a nested virtual model by its models (strengths, cheapest, fastest)."""
    leaves = table.leaf_models(candidate.name)
    strengths: frozenset[str] = frozenset().union(*(leaf.strengths for leaf in leaves)) if leaves else frozenset()
    costs = [cost for leaf in leaves if (cost := estimate_cost_usd(leaf, contract)) is not None]
    if candidate.name in table.models:
        health = candidate.health
        latency, available = health.latency_estimate_s, health.vitals(now).available
    else:
        latencies = [lat for leaf in leaves if (lat := state.health.get(leaf.name).latency_estimate_s) is not None]
        latency = min(latencies) if latencies else None
        available = any(state.health.get(leaf.name).vitals(now).available for leaf in leaves)
    return TargetFacts(candidate.name, strengths, min(costs) if costs else None, latency, available)


def settle_policy(decision: PolicyDecision | None, plan: Plan) -> None:
    """After planning: a policy unmet at one virtual model is not the request's outcome when another branch of the
    plan still has targets (a nested virtual model further down the failover chain, say)."""
    if decision is not None and plan.models:
        decision.unmet = ""


def count_decision(decision: PolicyDecision | None) -> None:
    """Count the request's policy outcome and each fallback step (once per request, after ``settle_policy``)."""
    if decision is None:
        return
    outcome = "unmet" if decision.unmet else ("fallback" if decision.steps else "applied")
    POLICY_DECISIONS.labels(decision.selected.name, decision.current.name, outcome).inc()
    for step in decision.steps:
        POLICY_FALLBACK_STEPS.labels(step.from_policy, step.to_policy).inc()


def unmet_error(decision: PolicyDecision, plan: Plan, retry_after_s: float) -> GatewayError:
    """The 503 for a request whose policy chain left no qualifying target.

    Retry-After only when the latency bound is what failed: latency estimates move with traffic (by the estimate's
    decay time), while a strength or a cost bound is a fact of the configuration that waiting does not change.
    """
    unmet = plan.policy_unmet
    if unmet is None:
        raise ValueError("unmet_error needs a plan whose policy was unmet")
    policy, virtual_model, reasons = unmet
    spec = decision.current
    via = f" (via {decision.chain})" if decision.steps else ""
    message = (f"Routing policy `{policy}`{via}: no target of `{virtual_model}` meets {spec.constraints} "
               f"(unmet: {', '.join(reasons)}).")
    headers = {}
    if UNMET_LATENCY in reasons:
        headers["Retry-After"] = str(max(1, math.ceil(retry_after_s)))
    return GatewayError(503, message, code="routing_policy_unmet", param="X-Routing-Policy", headers=headers,
                        error_class="transient" if headers else "incompatible")


def policy_view(decision: PolicyDecision | None) -> dict[str, object] | None:
    """The policy as explain shows it: the decision and the policies configured along its chain."""
    if decision is None:
        return None
    return {**decision.as_event(), "constraints": decision.current.constraints}

