"""Checks across rows of the routing configuration, shared by the admin forms.

A single form sees one row; these see the rest of the database, so the admin refuses a target that does not
exist, a cycle or over-deep nesting of virtual models, and a public name that is already taken.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings

from routing import models as m
from routing.core.categories import CATEGORIES, known_strengths
from routing.core.category_graph import RouteProblem, check_category_routes
from routing.core.embeddings import EmbeddingFacts, target_mix_problem
from routing.core.graph import GraphProblem, check_virtual_graph
from routing.core.names import slash_free_alias
from routing.core.policies import PolicyProblem, policy_problems


def public_name_owner(name: str, *, exclude: tuple[str, int | None]) -> str | None:
    """Which kind of entry already uses ``name`` as a public name ("model", ...), ignoring ``exclude``."""
    kind, pk = exclude
    lookups = (
        ("model", m.ProviderModel.objects.filter(name=name)),
        ("virtual model", m.VirtualModel.objects.filter(source=name)),
        ("tier route", m.TierRoute.objects.filter(alias=name)),
        ("category route", m.CategoryRoute.objects.filter(alias=name)),
    )
    for label, queryset in lookups:
        if label == kind and pk is not None:
            queryset = queryset.exclude(pk=pk)
        if queryset.exists():
            return label
    # A model's slash-free alias is callable too (routing.core.names): it takes its name as well.
    models = m.ProviderModel.objects.filter(name__contains="/")
    if kind == "model" and pk is not None:
        models = models.exclude(pk=pk)
    for model_name in models.values_list("name", flat=True):
        if slash_free_alias(model_name) == name:
            return f'model ("{model_name}", whose slash-free alias it is)'
    if kind == "model":
        alias = slash_free_alias(name)
        if alias is not None:
            owner = public_name_owner(alias, exclude=(kind, pk))
            if owner is not None:
                return f'{owner} (the slash-free alias "{alias}" of this name)'
    return None


def callable_names() -> set[str]:
    """Names a tier route or a virtual model may point at: concrete and virtual models."""
    names = set(m.ProviderModel.objects.values_list("name", flat=True))
    names.update(m.VirtualModel.objects.values_list("source", flat=True))
    return names


def tier_aliases() -> set[str]:
    """The tier aliases: the stored tier routes and those of PRO_SMART_ROUTING_ROUTES (they exist at run time)."""
    return set(m.TierRoute.objects.values_list("alias", flat=True)) | set(settings.PRO_SMART_ROUTING_ROUTES)


def graph_problems_with(source: str, targets: Sequence[str], *, previous_source: str | None) -> list[GraphProblem]:
    """Graph problems if ``source`` had ``targets``, everything else as stored now."""
    # The edited model goes first, so a cycle through it is reported from its point of view.
    edges: dict[str, list[str]] = {source: list(targets)}
    for vm in m.VirtualModel.objects.prefetch_related("targets"):
        if vm.source in (source, previous_source):
            continue
        edges[vm.source] = [t.target for t in vm.targets.all()]
    concrete = set(m.ProviderModel.objects.values_list("name", flat=True))
    return check_virtual_graph(edges, concrete)


def embedding_mix_problem_with(source: str, targets: Sequence[str], *,
                               previous_source: str | None) -> tuple[str, str] | None:
    """(field, problem) if ``source`` had ``targets`` and its models could not stand in for each other
    (chat mixed with embeddings, or embedding models of another family or size), else None."""
    edges: dict[str, list[str]] = {vm.source: [t.target for t in vm.targets.all()]
                                   for vm in m.VirtualModel.objects.prefetch_related("targets")
                                   if vm.source not in (source, previous_source)}
    edges[source] = list(targets)
    facts = {row.name: EmbeddingFacts(row.name, frozenset(row.endpoints or ["chat"]), row.dimensions, row.family)
             for row in m.ProviderModel.objects.all()}

    def leaves(name: str, depth: int = 0) -> list[EmbeddingFacts]:
        if name in facts:
            return [facts[name]]
        if depth > 8:
            return []
        return [leaf for target in edges.get(name, []) for leaf in leaves(target, depth + 1)]

    return target_mix_problem(leaves(source))


def category_route_problems_with(alias: str, targets: dict[str, str], *,
                                 previous_alias: str | None) -> list[RouteProblem]:
    """Problems of the category route ``alias`` if it had ``targets`` ({category or "default": target}), every
    other route as stored now; only the edited route's own problems are returned."""
    routes: dict[str, dict[str, str]] = {alias: targets}
    for row in m.CategoryRoute.objects.all():
        if row.alias not in (alias, previous_alias):
            routes[row.alias] = {**row.category_targets(), "default": row.default_target}
    problems = check_category_routes(routes, callable_names=callable_names(), tier_aliases=tier_aliases())
    return [problem for problem in problems if problem.alias == alias]


def policy_problems_with(name: str, fields: dict[str, object], *, previous_name: str | None) -> list[PolicyProblem]:
    """Problems of the routing policy ``name`` if it had ``fields``, every other policy as stored now; only the
    edited policy's own problems are returned (a cycle through it is reported from its point of view)."""
    policies: dict[str, dict[str, object]] = {name: fields}
    for row in m.RoutingPolicy.objects.select_related("fallback_to"):
        if row.name in (name, previous_name):
            continue
        stored = row.as_fields()
        if stored.get("fallback_to") == previous_name and previous_name is not None:
            stored["fallback_to"] = name  # a rename keeps the references to it
        policies[row.name] = stored
    known = known_strengths(carried_strengths())
    return [problem for problem in policy_problems(policies, strengths=known) if problem.policy == name]


def carried_strengths(*, except_model: int | None = None) -> set[str]:
    """Every strength tag the stored models carry (leaving out the model ``except_model``, being edited)."""
    rows = m.ProviderModel.objects.exclude(pk=except_model) if except_model is not None else m.ProviderModel.objects
    return {tag for tags in rows.values_list("strengths", flat=True) for tag in tags or () if isinstance(tag, str)}


def policies_losing_strength(strengths: Sequence[str], *, model_pk: int | None) -> dict[str, str]:
    """``{policy: tag}`` for each policy whose strength no model would carry if the model ``model_pk`` (None: a new
    one) had ``strengths``; categories are always known, so only other tags can be lost."""
    carried = carried_strengths(except_model=model_pk) | set(strengths)
    lost = {}
    for name, tag in m.RoutingPolicy.objects.exclude(strength="").values_list("name", "strength"):
        if tag not in CATEGORIES and tag not in carried:
            lost[name] = tag
    return lost
