"""The ``category_routes`` section: parse and check it, apply it, dump it back, compile it into the RoutingTable.

``category_routes: {ALIAS: {code: TARGET, writing: TARGET, ..., default: TARGET, contract: NAME, enabled: BOOL}}``.
A target is a model, a virtual model or a tier alias, in the file or already configured; the canonical form
lists the categories given, in the order of ``CATEGORIES``, then ``default``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings

from routing import models as m
from routing.config.file.checks import _check_bool, _check_name, _Checker
from routing.core.categories import CATEGORIES
from routing.core.category_graph import DEFAULT_KEY, check_category_routes
from routing.core.table import CategoryRouteSpec

SECTION = "category_routes"
_ROUTE_KEYS = (*CATEGORIES, DEFAULT_KEY, "contract", "enabled")


def parse_category_routes(chk: _Checker, data: Mapping[str, Any], contract_names: set[str]) -> dict[str, Any]:
    """The section's routes in canonical form (their targets are checked with the names, see ``check_targets``)."""
    raw = data.get(SECTION) or {}
    if not isinstance(raw, dict):
        chk.add(SECTION, "expected a mapping of alias -> {code: ..., writing: ..., default: ...}")
        return {}
    routes: dict[str, Any] = {}
    for alias, entry in raw.items():
        path = f"{SECTION}.{alias}"
        _check_name(chk, path, alias)
        if not isinstance(entry, dict):
            chk.add(path, f"expected a mapping of category -> target with a default ({', '.join(CATEGORIES)})")
            continue
        for key in entry:
            if key not in _ROUTE_KEYS:
                chk.add(f"{path}.{key}", f"unknown category (expected one of {', '.join(_ROUTE_KEYS)})")
        route: dict[str, Any] = {}
        for key in (*CATEGORIES, DEFAULT_KEY):
            target = entry.get(key)
            if target is None:
                continue
            if not isinstance(target, str) or not target.strip():
                chk.add(f"{path}.{key}", "expected a model, virtual model or tier alias name")
                continue
            route[key] = target.strip()
        if DEFAULT_KEY not in route and not any(problem.startswith(f"{path}.{DEFAULT_KEY}:")
                                                 for problem in chk.problems):
            chk.add(f"{path}.{DEFAULT_KEY}", "a category route needs a default target")
        contract = entry.get("contract")
        if contract is not None:
            if not isinstance(contract, str) or contract not in contract_names:
                chk.add(f"{path}.contract", f'unknown contract "{contract}"')
            route["contract"] = contract
        _check_bool(chk, f"{path}.enabled", entry.get("enabled"))
        if entry.get("enabled") is False:
            route["enabled"] = False
        routes[str(alias)] = route
    return routes


def check_targets(chk: _Checker, category_routes: Mapping[str, Any], *, model_names: set[str],
                  virtual_sources: set[str], tier_aliases: set[str]) -> None:
    """Each alias is a free public name and each target exists; no route points (back) at a category route.

    The names given are those of the file together with those already configured.
    """
    existing = {row.alias: {**row.category_targets(), DEFAULT_KEY: row.default_target}
                for row in m.CategoryRoute.objects.all()}
    taken = (("model", model_names), ("virtual model", virtual_sources), ("tier alias", tier_aliases))
    for alias in category_routes:
        for label, names in taken:
            if alias in names:
                chk.add(f"{SECTION}.{alias}", f'"{alias}" is already a {label} name')
    routes = {**existing, **{alias: {k: v for k, v in route.items() if k in (*CATEGORIES, DEFAULT_KEY)}
                             for alias, route in category_routes.items()}}
    env_aliases = set(settings.PRO_SMART_ROUTING_ROUTES)
    for problem in check_category_routes(routes, callable_names=model_names | virtual_sources,
                                         tier_aliases=tier_aliases | env_aliases):
        # A missing default is reported by the parser; a stored route's problems are not this file's.
        if problem.alias in category_routes and problem.target:
            chk.add(f"{SECTION}.{problem.alias}.{problem.key}", problem.message)


def check_names_against_routes(chk: _Checker, category_routes: Mapping[str, Any], *,
                               named: Mapping[str, list[str]]) -> None:
    """A model, virtual model or tier alias in the file may not take the name of a configured category route."""
    aliases = set(m.CategoryRoute.objects.values_list("alias", flat=True)) - set(category_routes)
    for section, names in named.items():
        for name in names:
            if name in aliases:
                chk.add(section, f'the public name "{name}" is already used by a category route')


def apply_category_routes(canonical: Mapping[str, Any], before: Mapping[str, Any],
                          contract_rows: Mapping[str, m.Contract]) -> None:
    """Create or update the file's category routes (unchanged ones are skipped)."""
    for alias, entry in canonical.get(SECTION, {}).items():
        if before.get(SECTION, {}).get(alias) == entry:
            continue
        m.CategoryRoute.objects.update_or_create(
            alias=alias,
            defaults={
                **{category: entry.get(category, "") for category in CATEGORIES},
                "default_target": entry[DEFAULT_KEY],
                "contract": contract_rows.get(entry.get("contract", "")),
                "enabled": entry.get("enabled", True),
            },
        )


def prune_category_routes(canonical: Mapping[str, Any]) -> None:
    m.CategoryRoute.objects.exclude(alias__in=list(canonical.get(SECTION, {}))).delete()


def category_route_entries() -> dict[str, dict[str, Any]]:
    """The configured category routes in canonical form, in the order they were created."""
    out: dict[str, dict[str, Any]] = {}
    for row in m.CategoryRoute.objects.select_related("contract").order_by("id"):
        entry: dict[str, Any] = {**row.category_targets(), DEFAULT_KEY: row.default_target}
        if row.contract is not None:
            entry["contract"] = row.contract.workload
        if not row.enabled:
            entry["enabled"] = False
        out[row.alias] = entry
    return out


def compile_category_routes() -> list[CategoryRouteSpec]:
    return [
        CategoryRouteSpec(
            alias=row.alias,
            targets=row.category_targets(),
            default=row.default_target,
            contract=row.contract.workload if row.contract else None,
            enabled=row.enabled,
        )
        for row in m.CategoryRoute.objects.select_related("contract")
    ]
