"""Category routes on the request path: the request's content category, and the target it selects.

``X-GoModel-Category: NAME`` forces the category for one request (an unknown name is a 400 naming the header).
A category route's target may be a tier alias: the engine then decides the tier as for a request to that alias,
so the category decides first and easy/hard second.
"""

from __future__ import annotations

from routing.core.categories import CATEGORIES, CATEGORY_HEADER, classify_category, forced_verdict
from routing.core.table import CategoryRouteSpec
from routing.gateway.gateway_error import GatewayError
from routing.gateway.records import Call, CategoryDecision
from routing.ops import metrics


def _forced_category(call: Call) -> str | None:
    raw = call.headers.get(CATEGORY_HEADER, "").strip().lower()
    if not raw:
        return None
    if raw not in CATEGORIES:
        raise GatewayError(400, f"X-GoModel-Category must be one of {', '.join(CATEGORIES)}, not `{raw[:40]}`.",
                           param="X-GoModel-Category", code="unknown_category", error_class="permanent")
    return raw


def category_verdict(call: Call, route: CategoryRouteSpec) -> CategoryDecision:
    """The category and target for this request (no metrics): shared by the engine and /v1/routing/explain."""
    forced = _forced_category(call)
    if forced is not None:
        verdict = forced_verdict(forced)
    else:
        settings = call.table.settings
        verdict = classify_category(call.features, keywords=settings.category_keywords,
                                    long_context_tokens=settings.category_long_context_tokens)
    return CategoryDecision(alias=route.alias, category=verdict.category, rule=verdict.rule, detail=verdict.detail,
                            target=route.target_for(verdict.category), forced=forced is not None)


def decide_category(call: Call, route: CategoryRouteSpec) -> CategoryDecision:
    """The decision of a real request, counted by alias and category."""
    decision = category_verdict(call, route)
    metrics.CATEGORY_DECISIONS.labels(route.alias, decision.category).inc()
    return decision
