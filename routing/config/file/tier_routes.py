"""The ``tier_routes`` section: parse and check it, apply it, dump it back, compile it into the RoutingTable.

``tier_routes: {ALIAS: {easy: TARGET, hard: TARGET, contract: NAME, enabled: BOOL}}``: a public alias whose
requests go to ``easy`` or ``hard`` (a model or virtual model) by the tier classifier (docs/smart-routing.md).
The targets are checked with every other name of the file (routing.config.file.cross_checks). The routes of
PRO_SMART_ROUTING_ROUTES are defaults the table starts from; a configured route of the same alias wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings

from routing import models as m
from routing.config.file.checks import _check_bool, _check_name, _check_unknown_keys, _Checker, _known
from routing.core.table import TierRouteSpec

SECTION = "tier_routes"


def parse_tier_routes(chk: _Checker, data: Mapping[str, Any], contract_names: set[str]) -> dict[str, dict[str, Any]]:
    """The section's routes in canonical form; a ``contract`` is of the file or configured."""
    routes: dict[str, dict[str, Any]] = {}
    raw_routes = data.get(SECTION) or {}
    if not isinstance(raw_routes, dict):
        chk.add(SECTION, 'expected a mapping of alias -> {easy: ..., hard: ...}')
        raw_routes = {}
    for alias, entry in raw_routes.items():
        path = f"{SECTION}.{alias}"
        _check_name(chk, path, alias)
        if not isinstance(entry, dict):
            chk.add(path, "expected {easy: model, hard: model}")
            continue
        routes[str(alias)] = _parse_route(chk, path, entry, contract_names)
    return routes


def _parse_route(chk: _Checker, path: str, entry: dict[str, Any], contract_names: set[str]) -> dict[str, Any]:
    """One ``tier_routes`` entry (its targets are checked with the names)."""
    _check_unknown_keys(chk, path, entry, ("easy", "hard", "contract", "enabled"))
    route: dict[str, Any] = {}
    for tier in ("easy", "hard"):
        if not isinstance(entry.get(tier), str):
            chk.add(f"{path}.{tier}", "expected a model or virtual model name")
        route[tier] = entry.get(tier)
    if entry.get("contract") is not None:
        if not _known(entry["contract"], contract_names):
            chk.add(f"{path}.contract", f'unknown contract "{entry["contract"]}"')
        route["contract"] = entry["contract"]
    _check_bool(chk, f"{path}.enabled", entry.get("enabled"))
    if entry.get("enabled") is False:
        route["enabled"] = False
    return route


def apply_tier_routes(canonical: Mapping[str, Any], before: Mapping[str, Any],
                      contract_rows: Mapping[str, m.Contract]) -> None:
    """Create or update the file's tier routes (unchanged ones are skipped)."""
    for alias, entry in canonical.get(SECTION, {}).items():
        if before.get(SECTION, {}).get(alias) == entry:
            continue
        m.TierRoute.objects.update_or_create(
            alias=alias,
            defaults={
                "easy": entry["easy"],
                "hard": entry["hard"],
                "contract": contract_rows.get(entry.get("contract", "")),
                "enabled": entry.get("enabled", True),
            },
        )


def prune_tier_routes(canonical: Mapping[str, Any]) -> None:
    m.TierRoute.objects.exclude(alias__in=list(canonical.get(SECTION, {}))).delete()


def tier_route_entries() -> dict[str, dict[str, Any]]:
    """The configured tier routes in canonical form, in the order they were created."""
    return {r.alias: _route_entry(r) for r in m.TierRoute.objects.select_related("contract").order_by("id")}


def _route_entry(route: m.TierRoute) -> dict[str, Any]:
    entry: dict[str, Any] = {"easy": route.easy, "hard": route.hard}
    if route.contract is not None:
        entry["contract"] = route.contract.workload
    if not route.enabled:
        entry["enabled"] = False
    return entry


def compile_tier_routes() -> list[TierRouteSpec]:
    # Routes from PRO_SMART_ROUTING_ROUTES are defaults; a route edited in the admin wins.
    routes = {
        alias: TierRouteSpec(alias=alias, easy=spec["easy"], hard=spec["hard"])
        for alias, spec in settings.PRO_SMART_ROUTING_ROUTES.items()
    }
    for row in m.TierRoute.objects.select_related("contract"):
        routes[row.alias] = TierRouteSpec(
            alias=row.alias,
            easy=row.easy,
            hard=row.hard,
            contract=row.contract.workload if row.contract else None,
            enabled=row.enabled,
        )
    return list(routes.values())
