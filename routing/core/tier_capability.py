"""Capability escalation: which tier of a tier alias can serve a request at all.

The classifier (and the session pin) choose a tier for how hard a request is, not for what it needs. When
the chosen tier's target cannot serve the request whatever its health (every enabled model behind it lacks
a capability the request needs: an image to a text-only easy tier, tools, a JSON schema, ``reasoning_effort``
to a model without reasoning), the request goes to the other tier instead of failing, provided that tier can
serve it. Only when neither can is the answer a 4xx naming the capability.

Capabilities come from two places, both the caller's: the effective contract (the request's modalities,
tools and schema, merged with its workload contract) and the capabilities the providers' own pre-send check
reads from the body (``routing.providers.capabilities``), which also sees reasoning. Health, cost, context
size and model class are not capabilities: a tier that fails on those is answered as today.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from routing.core.contracts import EffectiveContract
from routing.core.table import ModelSpec

TIERS = ("easy", "hard")


def wanted_capabilities(contract: EffectiveContract, needs: Collection[str]) -> frozenset[str]:
    """Every capability a model must list to serve this request (``text`` included)."""
    wanted = set(contract.modalities) | set(needs)
    if contract.needs_tools:
        wanted.add("tools")
    if contract.needs_json_schema:
        wanted.add("json_schema")
    return frozenset(wanted)


def capability_gap(models: Iterable[ModelSpec], wanted: frozenset[str]) -> tuple[str, ...] | None:
    """None when one of the enabled ``models`` lists every ``wanted`` capability (or there is no enabled model:
    that is not a capability matter); else what the closest model lacks, sorted (the first model on ties)."""
    closest: tuple[str, ...] | None = None
    for model in models:
        if not model.enabled:
            continue
        missing = wanted - model.capabilities
        if not missing:
            return None
        if closest is None or len(missing) < len(closest):
            closest = tuple(sorted(missing))
    return closest


@dataclass(frozen=True, slots=True)
class CapabilityVerdict:
    """The tier a request goes to once capabilities are considered.

    ``escalated``: the chosen tier cannot serve the request and ``tier`` (the other one) can. ``missing``
    maps each tier that cannot serve it to the capabilities its closest model lacks; when it holds both
    tiers, no tier can serve the request and ``tier`` is the chosen one.
    """

    tier: str
    escalated: bool
    missing: Mapping[str, tuple[str, ...]]

    @property
    def servable(self) -> bool:
        return self.tier not in self.missing

    @property
    def lacking(self) -> tuple[str, ...]:
        """Every capability some tier lacks, sorted: what a refusal names."""
        return tuple(sorted({c for gap in self.missing.values() for c in gap}))


def other_tier(tier: str) -> str:
    return "hard" if tier == "easy" else "easy"


def capable_tier(chosen: str, gaps: Mapping[str, tuple[str, ...] | None]) -> CapabilityVerdict:
    """Keep ``chosen`` when it can serve the request (its gap is None), else move to the other tier when that
    one can; ``gaps`` holds each tier's ``capability_gap`` (the other tier's is read only when needed)."""
    if chosen not in TIERS:
        raise ValueError(f"unknown tier {chosen!r}")
    own = gaps.get(chosen)
    if own is None:
        return CapabilityVerdict(chosen, False, {})
    other = other_tier(chosen)
    theirs = gaps.get(other)
    if theirs is None:
        return CapabilityVerdict(other, True, {chosen: own})
    return CapabilityVerdict(chosen, False, {chosen: own, other: theirs})
