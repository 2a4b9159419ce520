"""The checks across sections: the names clients call, the graph of virtual models, what serves embeddings.

Each check takes the sections as parsed and the rows already configured, and adds its problems by path.
"""

from __future__ import annotations

from typing import Any

from routing import models as m
from routing.config.file.caches import configured_embedders, embedding_virtuals
from routing.config.file.category_routes import check_names_against_routes, check_targets
from routing.config.file.checks import _Checker
from routing.config.file.provider_models import model_name
from routing.core.embeddings import EmbeddingFacts, target_mix_problem
from routing.core.graph import check_virtual_graph
from routing.core.names import alias_collisions
from routing.providers.embeddings import serves_embeddings


def file_embedders(models_out: list[dict[str, Any]], model_names: list[Any],
                    virtual: list[dict[str, Any]]) -> set[str]:
    """The file's names that serve embeddings: models with the endpoint and virtual models of them only."""
    names = {name for name, model in zip(model_names, models_out, strict=True)
             if isinstance(name, str) and "embeddings" in (model.get("endpoints") or [])}
    targets = {str(v["source"]): [str(t.get("model")) for t in v.get("targets") or [] if isinstance(t, dict)]
               for v in virtual if isinstance(v.get("source"), str)}
    return names | embedding_virtuals(names | configured_embedders(), targets)


def check_category_route_targets(chk: _Checker, category_routes: dict[str, Any], model_names: list[str],
                           virtual: list[dict[str, Any]], routes: dict[str, dict[str, Any]]) -> None:
    """Category routes against every name of the file and the database (routing.config.file.category_routes)."""
    models_ = {name for name in model_names if isinstance(name, str)}
    sources = {v["source"] for v in virtual if isinstance(v["source"], str)}
    check_targets(
        chk, category_routes,
        model_names=models_ | set(m.ProviderModel.objects.values_list("name", flat=True)),
        virtual_sources=sources | set(m.VirtualModel.objects.values_list("source", flat=True)),
        tier_aliases=set(routes) | set(m.TierRoute.objects.values_list("alias", flat=True)),
    )
    check_names_against_routes(chk, category_routes, named={
        "models": sorted(models_), "virtual_models": sorted(sources), "tier_routes": list(routes)})


def check_embedding_providers(chk: _Checker, models_out: list[dict[str, Any]],
                               providers: list[dict[str, Any]]) -> None:
    """An embedding model is on a provider kind the gateway can send embeddings to."""
    kinds = dict(m.Provider.objects.values_list("name", "kind"))
    kinds.update({p["name"]: p.get("kind") for p in providers})
    for i, entry in enumerate(models_out):
        kind = kinds.get(entry["provider"])
        if "embeddings" in entry.get("endpoints", ()) and kind is not None and not serves_embeddings(kind):
            chk.add(f"models[{i}].endpoints", f'the provider "{entry["provider"]}" ({kind}) has no embeddings '
                                              f"endpoint the gateway can call")


def check_embedding_targets(chk: _Checker, models_out: list[dict[str, Any]], virtual: list[dict[str, Any]]) -> None:
    """Each virtual model's models serve one endpoint; embedding models share one family and one size."""
    facts = {row.name: EmbeddingFacts(row.name, frozenset(row.endpoints or ["chat"]), row.dimensions, row.family)
             for row in m.ProviderModel.objects.all()}
    for entry in models_out:
        name = model_name(entry)
        facts[name] = EmbeddingFacts(name, frozenset(entry.get("endpoints", ["chat"])), entry.get("dimensions"),
                                     entry.get("family", ""))
    edges: dict[str, list[str]] = {
        vm.source: [t.target for t in vm.targets.all()] for vm in m.VirtualModel.objects.prefetch_related("targets")
    }
    edges.update({v["source"]: [t["model"] for t in v["targets"]] for v in virtual})

    def leaves(name: str, depth: int = 0) -> list[EmbeddingFacts]:
        if name in facts:
            return [facts[name]]
        if depth > 8:
            return []
        return [leaf for target in edges.get(name, []) for leaf in leaves(target, depth + 1)]

    for i, entry in enumerate(virtual):
        problem = target_mix_problem(leaves(entry["source"]))
        if problem is not None:
            chk.add(f"virtual_models[{i}].targets", f"{problem[0]}: {problem[1]}")


def check_slash_free_aliases(chk: _Checker, model_names: list[str], file_names: set[str]) -> None:
    """A model's slash-free alias (routing.core.names) may not be another public name or another model's alias;
    ``file_names`` are the file's virtual models, tier and category aliases."""
    model_names = [name for name in model_names if isinstance(name, str)]
    existing_models = set(m.ProviderModel.objects.values_list("name", flat=True))
    others = set(file_names)
    others |= set(m.VirtualModel.objects.values_list("source", flat=True))
    others |= set(m.TierRoute.objects.values_list("alias", flat=True))
    others |= set(m.CategoryRoute.objects.values_list("alias", flat=True))
    problems = alias_collisions([*model_names, *sorted(existing_models - set(model_names))], others)
    for i, name in enumerate(model_names):
        if name in problems:
            chk.add(f"models[{i}].name", f'"{name}": {problems[name]}')


def check_names_and_graph(
        chk: _Checker, model_names: list[str], virtual: list[dict[str, Any]], routes: dict[str, dict[str, Any]],
) -> None:
    """Public names unique across models, virtual models and aliases; no cycles or missing targets."""
    # Names across the three namespaces a client can call, then the graph of virtual models.
    existing_models = set(m.ProviderModel.objects.values_list("name", flat=True))
    existing_virtual = set(m.VirtualModel.objects.values_list("source", flat=True))
    existing_aliases = set(m.TierRoute.objects.values_list("alias", flat=True))
    model_names = [name for name in model_names if isinstance(name, str)]
    sources = [v["source"] if isinstance(v["source"], str) else None for v in virtual]  # by position
    all_models = existing_models | set(model_names)
    seen: dict[str, str] = {}
    for label, names in (("models", model_names), ("virtual_models", [s for s in sources if s is not None]),
                         ("tier_routes", list(routes))):
        for name in names:
            if name in seen and seen[name] != label:
                chk.add(label, f'the public name "{name}" is already used in {seen[name]}')
            seen.setdefault(name, label)
    aliases = existing_aliases | set(routes)
    for i, source in enumerate(sources):
        if source in all_models:
            chk.add(f"virtual_models[{i}].source", f'"{source}" is already a model name')
        elif source in aliases:
            chk.add(f"virtual_models[{i}].source", f'"{source}" is already a tier alias')
    edges: dict[str, list[str]] = {
        vm.source: [t.target for t in vm.targets.all()] for vm in m.VirtualModel.objects.prefetch_related("targets")
    }
    edges.update({v["source"]: [t["model"] for t in v["targets"]] for v in virtual if isinstance(v["source"], str)})
    index = {source: i for i, source in enumerate(sources) if source is not None}
    for problem in check_virtual_graph(edges, all_models):
        if problem.source not in index:
            continue
        i = index[problem.source]
        names = [t["model"] for t in virtual[i]["targets"]]
        path = f"virtual_models[{i}]"
        if problem.target in names:
            path += f".targets[{names.index(problem.target)}].model"
        chk.add(path, problem.message)
    callable_names = all_models | set(edges)
    for alias, route in routes.items():
        for tier in ("easy", "hard"):
            target = route.get(tier)
            if isinstance(target, str) and target not in callable_names:
                chk.add(f"tier_routes.{alias}.{tier}", f'unknown model "{target}"')
        if alias in callable_names | existing_virtual:
            chk.add(f"tier_routes.{alias}", f'"{alias}" is already a model or virtual model name')
