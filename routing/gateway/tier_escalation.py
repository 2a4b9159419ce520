"""Capability escalation on the request path: a tier that cannot serve the request hands it to the other tier.

After the tier is decided (``tiers.decide_tier``) and the contract is known, the chosen tier's target is
checked for the capabilities the request needs (``routing.core.tier_capability``). When it lacks one and the
other tier has it, the request goes to the other tier: ``X-GoModel-Pro-Tier`` and the audit name the tier
used, ``X-GoModel-Pro-Tier-Escalated: capability`` and the audit's ``escalation`` say why, and a 0-point
``capability`` signal says what was missing. When neither tier has it, the answer is a 400 naming the
capability, in the client's envelope.

Session pins only escalate: a move up to hard raises the session's pin as a hard verdict would (except when
``X-GoModel-Smart-Routing: off`` leaves the pin alone); a move down to easy (a hard tier that cannot take an
image the easy tier can) serves this one request on easy and leaves the pin where it was. A tier forced by
``X-GoModel-Tier``, or smart routing disabled, is not second-guessed: the request is answered as today.

The check costs nothing for a plain text request (no capability beyond ``text``); otherwise it walks the
chosen target's models once (and the other tier's only when the chosen one cannot serve).
"""

from __future__ import annotations

from collections.abc import Mapping

from routing.core.classifier import Signal
from routing.core.contracts import EffectiveContract
from routing.core.table import TierRouteSpec
from routing.core.tier_capability import (
    CapabilityVerdict,
    capability_gap,
    capable_tier,
    other_tier,
    wanted_capabilities,
)
from routing.gateway.gateway_error import GatewayError
from routing.gateway.records import Call, TierDecision
from routing.gateway.resolve import request_contract
from routing.gateway.state import state
from routing.gateway.tiers import TIER_PIN_NAMESPACE
from routing.ops import metrics

CAPABILITY = "capability"
_TEXT_ONLY = frozenset({"text"})
_KEEP = {tier: CapabilityVerdict(tier, False, {}) for tier in ("easy", "hard")}  # immutable by convention


async def capable_route(call: Call, route: TierRouteSpec, tier: str, route_contract: str | None,
                        contract: EffectiveContract) -> tuple[CapabilityVerdict, EffectiveContract]:
    """The capability verdict for ``tier`` of ``route`` and the contract of the tier it names.

    Changes nothing (``/v1/routing/explain`` uses it as it is); raises the 400 when no tier can serve.
    """
    needs = call.needs
    if not needs and contract.modalities <= _TEXT_ONLY and not contract.needs_tools and not contract.schemas:
        return _KEEP[tier], contract  # most requests: plain text, which every model takes
    wanted = wanted_capabilities(contract, needs)
    table = call.table
    targets = {"easy": route.easy, "hard": route.hard}
    gaps: dict[str, tuple[str, ...] | None] = {tier: capability_gap(table.leaf_models(targets[tier]), wanted)}
    if gaps[tier] is None:
        return _KEEP[tier], contract
    other = other_tier(tier)
    other_contract = await request_contract(call, targets[other], route_contract)
    gaps[other] = capability_gap(table.leaf_models(targets[other]), wanted_capabilities(other_contract, needs))
    verdict = capable_tier(tier, gaps)
    if not verdict.servable:
        raise _refusal(route, verdict, needs)
    return verdict, other_contract


async def escalate_for_capability(call: Call, route: TierRouteSpec, decision: TierDecision,
                                  route_contract: str | None, contract: EffectiveContract) -> EffectiveContract:
    """Apply capability escalation to ``decision`` (tier, target, signals, pin); the contract to plan with."""
    if decision.forced or not call.table.settings.smart_routing_enabled:
        return contract
    verdict, contract = await capable_route(call, route, decision.tier, route_contract, contract)
    if not verdict.escalated:
        return contract
    before, target_before = decision.tier, decision.target
    decision.tier = verdict.tier
    decision.target = route.hard if verdict.tier == "hard" else route.easy
    decision.escalation = CAPABILITY
    decision.signals = (*decision.signals,
                        Signal(CAPABILITY, 0, f"{target_before} lacks {', '.join(verdict.missing[before])}"))
    decision.notes.append(f"{before} tier cannot serve the request: moved to {verdict.tier}")
    decision.pinned = False
    if verdict.tier == "hard" and not decision.bypassed:
        # Pins only escalate: this request raises the session's pin as a hard verdict would.
        key = f"{route.alias}|{call.session.value}"
        await state.pins.escalate(TIER_PIN_NAMESPACE, key, "hard", call.table.settings.smart_routing_session_ttl_s)
        decision.escalated = True  # the pin was easy or none: a hard pin would have chosen hard already
    metrics.SMART_ESCALATIONS.labels(route.alias, CAPABILITY).inc()
    return contract


def _refusal(route: TierRouteSpec, verdict: CapabilityVerdict, needs: Mapping[str, str]) -> GatewayError:
    """The 400 when no tier can serve: the capabilities by name, each tier's gap, the first use in the body."""
    lacking = verdict.lacking
    used_at = next((needs[c] for c in lacking if c in needs), None)
    where = f" (used at {used_at})" if used_at else ""
    gaps = "; ".join(f"`{route.easy if tier == 'easy' else route.hard}` ({tier}) lacks {', '.join(gap)}"
                     for tier, gap in sorted(verdict.missing.items()))
    return GatewayError(
        400,
        f"No tier of `{route.alias}` can serve this request: it needs the capability "
        f"{', '.join(f'`{c}`' for c in lacking)}{where}; {gaps}.",
        code="unsupported_capability", param=used_at, error_class="incompatible",
    )
