"""From a target name to the ordered list of concrete models to try, and why.

A concrete model is its own plan. A virtual model first drops the targets that cannot meet the request's
contract (modalities, context, tools, schema, class, cost) and the models whose provider rpm/tpm for this
account is used up in the last minute (skipped like a cooling target, listed with ``at_provider_rpm`` or
``at_provider_tpm``), then lets its strategy pick among the rest; the pick comes first and the others form the
failover chain. Nested virtual models are planned recursively.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from routing.core.contracts import EffectiveContract, filter_candidates
from routing.core.provider_limits import LIMIT_REASONS
from routing.core.selector import Candidate, select
from routing.core.table import ModelSpec, RoutingTable
from routing.gateway.policies import policy_candidates
from routing.gateway.records import Plan, PolicyDecision, SelectionRecord
from routing.gateway.state import GatewayState
from routing.ops import metrics

TARGET_PIN_NAMESPACE = "target"


@dataclass(frozen=True)
class PlanInputs:
    table: RoutingTable
    contract: EffectiveContract
    session_targets: dict[str, str]  # virtual model -> the target this session is pinned to
    warm_target: str | None  # the concrete model that last served this session (warm prompt cache)
    now: float
    policy: PolicyDecision | None = None  # the request's routing policy (routing.gateway.policies); None: none


def plan_targets(name: str, inputs: PlanInputs, state: GatewayState) -> Plan:
    plan = Plan()
    _plan_into(name, inputs, state, plan, depth=0)
    # Each concrete model once, in the order first reached.
    first_reached: dict[str, ModelSpec] = {}
    for model in plan.models:
        first_reached.setdefault(model.name, model)
    plan.models = list(first_reached.values())
    return plan


def _plan_into(name: str, inputs: PlanInputs, state: GatewayState, plan: Plan, depth: int) -> None:
    table = inputs.table
    model = table.models.get(name)
    if model is not None:
        if model.enabled:
            eligible, rejected = filter_candidates([model], inputs.contract)
            plan.rejected.extend(rejected)
            if eligible and _at_limit(model.name, inputs, state, plan) is None:
                plan.models.extend(eligible)
        return
    virtual = table.virtual_models.get(name)
    if virtual is None or not virtual.enabled or depth > 8:
        return

    candidates: list[Candidate] = []
    # The concrete models among the targets, once they passed the contract and their provider's limits below:
    # planned as they are, without checking them again one level down.
    vetted: dict[str, ModelSpec] = {}
    record = SelectionRecord(virtual_model=name, strategy=virtual.strategy, selection=None, winner=None, why="")
    for target in virtual.targets:
        if table.kind_of(target.name) is None:
            record.skipped.append((target.name, "disabled"))
            continue
        leaves = table.leaf_models(target.name)
        eligible, rejected = filter_candidates(list(leaves), inputs.contract)
        if not eligible:
            reason = rejected[0][1] if rejected else "no eligible model"
            record.skipped.append((target.name, reason))
            plan.rejected.extend(rejected)
            continue
        limit = _at_limit(target.name, inputs, state, plan) if target.name in table.models else None
        if limit is not None:
            record.skipped.append((target.name, limit))
            continue
        if eligible[0].name == target.name:  # a concrete model by its own name (an alias is planned by name below)
            vetted[target.name] = eligible[0]
        candidates.append(Candidate(name=target.name, health=state.health.get(target.name), weight=target.weight,
                                    price=table.cheapest_price(target.name)))

    if not candidates:
        limited = any(reason in LIMIT_REASONS for _name, reason in record.skipped)
        record.why = "every eligible target is at its provider's limit" if limited else \
            "no target meets the request's contract"
        plan.records.append(record)
        return

    strategy = virtual.strategy
    if inputs.policy is not None:
        # The policy filters and orders the candidates (and may fall back along its chain); health still decides
        # below. Its own order is tried as given ("failover"), except for the strength strategy.
        candidates, ordered_by = policy_candidates(
            name, candidates, decision=inputs.policy, table=table, contract=inputs.contract, state=state,
            now=inputs.now, plan=plan, record=record)
        if not candidates:
            plan.records.append(record)
            return
        strategy = ordered_by or strategy

    if len(candidates) == 1:
        only = candidates[0]
        if only.health.vitals(inputs.now).available:
            record.winner, record.why = only.name, _policy_why(inputs, "only eligible target")
            record.candidates = [_candidate_view(only, 1.0, inputs.now, 0)]
            plan.records.append(record)
            _plan_next(only.name, vetted, inputs, state, plan, depth)
            return

    # A policy's own order is deterministic, so a session keeps its target without a pin or a warm-cache bonus.
    session_target = inputs.session_targets.get(name) if virtual.session_affinity and strategy == virtual.strategy \
        else None
    warm = inputs.warm_target if any(c.name == inputs.warm_target for c in candidates) else None
    selection = select(
        strategy,
        candidates,
        now=inputs.now,
        rng=state.rng,
        config=state.selector_config,
        session_target=session_target,
        warm_target=warm,
        rr_state=state.rr_state(name),
    )
    record.selection = selection
    record.winner = selection.winner
    record.why = _policy_why(inputs, selection.why)
    record.skipped.extend(selection.skipped)
    weights = selection.weights
    # Cold start and exploration belong to the adaptive strategy (not to its round-robin stand-in).
    config = state.selector_config
    cold_start = config.cold_start_observations if selection.strategy == "adaptive" else 0
    record.exploration = config.exploration if selection.strategy == "adaptive" else 0.0
    record.candidates = [_candidate_view(c, weights.get(c.name, 0.0), inputs.now, cold_start) for c in candidates]
    plan.records.append(record)
    if selection.winner is None:
        retry_after = selection.all_cooling_retry_after_s
        if retry_after is not None:
            plan.retry_after_s = retry_after if plan.retry_after_s is None else min(plan.retry_after_s, retry_after)
        return
    for target_name in selection.order:
        _plan_next(target_name, vetted, inputs, state, plan, depth)


def _plan_next(name: str, vetted: dict[str, ModelSpec], inputs: PlanInputs, state: GatewayState, plan: Plan,
               depth: int) -> None:
    """Plan a chosen target: a vetted concrete model as it is (nothing it was checked against has changed since,
    at the same ``now``), anything else one level down."""
    model = vetted.get(name)
    if model is not None:
        plan.models.append(model)
    else:
        _plan_into(name, inputs, state, plan, depth + 1)


def _policy_why(inputs: PlanInputs, why: str) -> str:
    """The selection's reason, naming the routing policy in force when there is one."""
    policy = inputs.policy
    if policy is None:
        return why
    return f"routing policy {policy.current.name} ({policy.current.strategy}): {why}"


def _at_limit(name: str, inputs: PlanInputs, state: GatewayState, plan: Plan) -> str | None:
    """Why the concrete model ``name`` is skipped for its provider's rpm/tpm (counted, and when it has room
    again noted in the plan), or None when it may take the request."""
    reason = state.quotas.blocked(name, inputs.now)
    if reason is not None:
        metrics.TARGET_LIMIT_SKIPS.labels(name, reason).inc()
        wait = state.quotas.retry_after_s(name, inputs.now)
        plan.limit_retry_after_s = wait if plan.limit_retry_after_s is None else min(plan.limit_retry_after_s, wait)
    return reason


def _candidate_view(candidate: Candidate, weight: float, now: float, cold_start: int) -> dict[str, Any]:
    """One candidate as the audit and explain show it; ``cold_start`` is the adaptive selector's N (0: none)."""
    health = candidate.health
    vitals = health.vitals(now)
    latency, cooldown_until = vitals.latency_estimate_s, vitals.cooldown_until
    observations = health.observations
    return {
        "target": candidate.name,
        "weight": round(weight, 4),
        "latency_ms": None if latency is None else round(latency * 1000, 2),
        "in_flight": vitals.in_flight,
        # Health runs on the monotonic clock; auditors read wall-clock time.
        "cooldown_until": None if cooldown_until is None else round(time.time() + cooldown_until - now, 3),
        "status": vitals.status,
        "observations": observations,
        "cold_start": observations < cold_start,
    }
