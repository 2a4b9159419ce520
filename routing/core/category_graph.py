"""Checks on category routes' targets: every target exists, and no route leads (back) to a category route.

A category route's target is a model, a virtual model or a tier alias. Another category route is refused:
the category is decided once per request, so a second route would only repeat the first decision, and a
chain of them could loop. A loop is reported as the cycle it makes (``cycle: a -> b -> a``). Used by the
admin and the config loader alike, so an operator gets the same message wherever a route comes from.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

DEFAULT_KEY = "default"


@dataclass(frozen=True, slots=True)
class RouteProblem:
    alias: str  # the category route whose target is wrong
    key: str  # the category (or "default") whose target it is
    target: str
    message: str


def check_category_routes(
    routes: Mapping[str, Mapping[str, str]],
    *,
    callable_names: Collection[str],
    tier_aliases: Collection[str],
) -> list[RouteProblem]:
    """Problems in ``routes`` (alias -> {category or "default": target}), given the names a target may be."""
    problems: list[RouteProblem] = []
    for alias, targets in routes.items():
        if not targets.get(DEFAULT_KEY):
            problems.append(RouteProblem(alias, DEFAULT_KEY, "", "a category route needs a default target"))
        for key, target in targets.items():
            if not target:
                continue
            if target in routes:
                cycle = _cycle_through(alias, target, routes)
                message = ("cycle: " + " -> ".join(cycle) if cycle else
                           f'"{target}" is a category route: a category route may point at a model, a virtual '
                           "model or a tier alias")
                problems.append(RouteProblem(alias, key, target, message))
            elif target not in callable_names and target not in tier_aliases:
                problems.append(RouteProblem(alias, key, target, f'unknown model "{target}"'))
    return problems


def _cycle_through(alias: str, first: str, routes: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The path ``alias -> first -> ... -> alias`` through category routes, or [] when ``first`` never leads back."""
    stack: list[list[str]] = [[alias, first]]
    seen: set[str] = set()
    while stack:
        path = stack.pop()
        node = path[-1]
        if node == alias:
            return path
        if node in seen:
            continue
        seen.add(node)
        for target in dict.fromkeys(routes.get(node, {}).values()):
            if target in routes:
                stack.append(path + [target])
    return []
