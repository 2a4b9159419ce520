"""The ``routing_policies`` section: parse and check it, apply it, dump it back, compile it into the RoutingTable.

``routing_policies: {NAME: {strategy, strength, max_latency_ms, max_cost_usd, fallback_to}}`` (see
routing.core.policies); ``strength`` is a category or a tag some model carries. ``strategy`` defaults to
``priority``; the canonical form always names it and leaves out the constraints that are not set.
``fallback_to`` names a policy of the file or one already configured; a chain that comes back to a policy it
passed is refused naming the cycle (``routing_policies.fast.fallback_to: cycle: fast -> cheap -> fast``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from routing import models as m
from routing.config.file.checks import _check_name, _check_unknown_keys, _Checker, _num
from routing.config.file.schema import ConfigError
from routing.core.categories import known_strengths
from routing.core.policies import PolicySpec, policy_problems

SECTION = "routing_policies"
_FIELDS = ("strategy", "strength", "max_latency_ms", "max_cost_usd", "fallback_to")


def parse_routing_policies(chk: _Checker, data: Mapping[str, Any], *,
                           carried: Collection[str]) -> dict[str, dict[str, Any]]:
    """The section's policies in canonical form, each checked with the policies already configured.

    ``carried`` holds every tag a model carries once the file is applied: a policy's ``strength`` is one of them
    or a category. A configured policy the file leaves alone is checked too, so the file cannot take away the
    last tag it selects by.
    """
    raw = data.get(SECTION) or {}
    if not isinstance(raw, dict):
        chk.add(SECTION, "expected a mapping of name -> {strategy, strength, max_latency_ms, max_cost_usd, "
                         "fallback_to}")
        return {}
    policies: dict[str, dict[str, Any]] = {}
    for name, entry in raw.items():
        path = f"{SECTION}.{name}"
        if not _check_name(chk, path, name):
            continue
        if not isinstance(entry, dict):
            chk.add(path, f"expected a mapping with {', '.join(_FIELDS)}")
            continue
        _check_unknown_keys(chk, path, entry, _FIELDS)
        policy: dict[str, Any] = {"strategy": entry.get("strategy", "priority")}
        if entry.get("strength") is not None:
            policy["strength"] = entry["strength"]
        if entry.get("max_latency_ms") is not None:
            policy["max_latency_ms"] = entry["max_latency_ms"]  # a whole number (checked below)
        if entry.get("max_cost_usd") is not None:
            cost = _num(entry["max_cost_usd"])
            policy["max_cost_usd"] = entry["max_cost_usd"] if cost is None else cost
        if entry.get("fallback_to") is not None:
            policy["fallback_to"] = entry["fallback_to"]
        policies[str(name)] = policy
    existing = routing_policy_entries()
    merged = {**existing, **policies}
    for problem in policy_problems(merged, strengths=known_strengths(carried)):
        if problem.policy in policies:
            chk.add(f"{SECTION}.{problem.policy}.{problem.field}", problem.message)
        elif problem.field == "strength":
            chk.add(f"{SECTION}.{problem.policy}.strength", f"the configured policy selects by a tag no model "
                                                            f"would carry any more: {problem.message}")
    return policies


def apply_routing_policies(canonical: Mapping[str, Any], before: Mapping[str, Any]) -> None:
    """Create or update the file's policies: first every row, then the references between them."""
    wanted: dict[str, dict[str, Any]] = canonical.get(SECTION, {})
    had = before.get(SECTION, {})
    changed = {name: entry for name, entry in wanted.items() if had.get(name) != entry}
    for name, entry in changed.items():
        m.RoutingPolicy.objects.update_or_create(
            name=name,
            defaults={
                "strategy": entry["strategy"],
                "strength": entry.get("strength", ""),
                "max_latency_ms": entry.get("max_latency_ms"),
                "max_cost_usd": entry.get("max_cost_usd"),
            },
        )
    for name, entry in changed.items():
        fallback = entry.get("fallback_to")
        row = m.RoutingPolicy.objects.get(name=name)
        row.fallback_to = m.RoutingPolicy.objects.get(name=fallback) if fallback else None
        row.save(update_fields=["fallback_to", "updated_at"])


def prune_routing_policies(canonical: Mapping[str, Any]) -> None:
    """Delete the policies the file does not name; a kept policy may not fall back to one of them."""
    keep = list(canonical.get(SECTION, {}))
    doomed = m.RoutingPolicy.objects.exclude(name__in=keep)
    problems = [f"{SECTION}.{row.name}.fallback_to: the policy \"{row.fallback_to.name}\" is not in the file "
                f"and would be deleted" for row in m.RoutingPolicy.objects.filter(name__in=keep)
                .select_related("fallback_to") if row.fallback_to is not None and row.fallback_to.name not in keep]
    if problems:
        raise ConfigError(problems)
    doomed.update(fallback_to=None)  # references among the deleted ones go first (RESTRICT)
    for row in doomed:
        row.delete()


def routing_policy_entries() -> dict[str, dict[str, Any]]:
    """The configured policies in canonical form, in the order they were created."""
    return {row.name: row.as_fields() for row in m.RoutingPolicy.objects.select_related("fallback_to").order_by("id")}


def compile_routing_policies() -> list[PolicySpec]:
    return [
        PolicySpec(
            name=row.name,
            strategy=row.strategy,
            strength=row.strength or None,
            max_latency_ms=None if row.max_latency_ms is None else float(row.max_latency_ms),
            max_cost_usd=row.max_cost_usd,
            fallback_to=row.fallback_to.name if row.fallback_to else None,
        )
        for row in m.RoutingPolicy.objects.select_related("fallback_to")
    ]
