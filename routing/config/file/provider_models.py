"""The ``models`` section: parse and check it, apply it, dump it back, compile it into the RoutingTable.

A model names its ``provider`` (of the file or configured) and its ``upstream`` name there; its public ``name``
defaults to ``provider/upstream``. Prices (``input_price``, ``output_price``, ``cached_input_price``, per million
tokens, or ``prices: catalogue``: routing.config.file.model_prices), limits, ``capabilities``, ``strengths``,
``endpoints`` (with ``dimensions`` and ``family`` for an embedding model), ``model_class`` and ``enabled`` are
optional; the canonical form always lists the capabilities.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routing import models as m
from routing.config.file.checks import (
    _check_bool,
    _check_duplicates,
    _check_name,
    _check_number,
    _check_unknown_keys,
    _Checker,
    _entries,
    _num,
)
from routing.config.file.model_prices import catalogue_fill, parse_prices_as_of
from routing.config.file.values import date_in, decimal_in, float_out
from routing.core.categories import CATEGORIES, strength_tag_problem
from routing.core.embeddings import embedding_field_problems
from routing.core.table import CAPABILITIES, ENDPOINTS, ModelSpec

SECTION = "models"
_FIELDS = ("provider", "upstream", "name", "input_price", "output_price", "cached_input_price", "prices",
           "prices_as_of", "context_window", "max_output_tokens", "capabilities", "model_class", "enabled", "rpm",
           "tpm", "strengths", "endpoints", "dimensions", "family")


def parse_models(chk: _Checker, data: Mapping[str, Any], provider_kinds: dict[str, str]) -> list[dict[str, Any]]:
    """The section's models in canonical form; each provider is of the file or configured (name -> kind)."""
    models = [_parse_model(chk, path, entry, provider_kinds) for path, entry in _entries(chk, data, SECTION)]
    _check_duplicates(chk, SECTION, [model_name(entry) for entry in models], "name")
    return models


def model_name(entry: Mapping[str, Any]) -> Any:
    """A canonical entry's public name: its ``name``, else ``provider/upstream``."""
    return entry.get("name") or f"{entry['provider']}/{entry['upstream']}"

def _parse_model(chk: _Checker, path: str, entry: dict[str, Any], provider_kinds: dict[str, str]) -> dict[str, Any]:
    """One ``models`` entry, whose provider is in the file or already configured (``provider_kinds``: name -> kind).

    With ``prices: catalogue`` the price catalogue fills what the entry leaves out (routing.config.file.model_prices).
    """
    _check_unknown_keys(chk, path, entry, _FIELDS)
    provider = entry.get("provider")
    if not isinstance(provider, str) or provider not in provider_kinds:
        chk.add(f"{path}.provider", f'unknown provider "{provider}"')
    kind = provider_kinds.get(provider) if isinstance(provider, str) else None
    entry = {**entry, **catalogue_fill(chk, path, entry, kind)}
    prices_as_of = parse_prices_as_of(chk, path, entry.get("prices_as_of"))
    upstream = entry.get("upstream")
    if not isinstance(upstream, str) or not upstream.strip():
        chk.add(f"{path}.upstream", "expected the provider's model name")
        upstream = ""
    name = entry.get("name") or f"{provider}/{upstream}"
    _check_name(chk, f"{path}.name", name)
    for price in ("input_price", "output_price", "cached_input_price"):
        _check_number(chk, f"{path}.{price}", entry.get(price))
    for size in ("context_window", "max_output_tokens", "rpm", "tpm"):
        _check_number(chk, f"{path}.{size}", entry.get(size), minimum=1, integer=True)
    caps = entry.get("capabilities", ["text"])
    if not isinstance(caps, list) or any(c not in CAPABILITIES for c in caps):
        chk.add(f"{path}.capabilities", f"expected a list of {', '.join(CAPABILITIES)}, got {caps!r}")
        caps = ["text"]
    strengths = entry.get("strengths", [])
    if not isinstance(strengths, list):
        chk.add(f"{path}.strengths", f"expected a list of tags (such as {', '.join(CATEGORIES)}), got {strengths!r}")
        strengths = []
    for s, tag in enumerate(strengths):
        if (problem := strength_tag_problem(tag)) is not None:
            chk.add(f"{path}.strengths[{s}]", problem)
    strengths = [tag for tag in strengths if strength_tag_problem(tag) is None]
    model_class = entry.get("model_class", "general")
    if not isinstance(model_class, str) or not model_class:
        chk.add(f"{path}.model_class", "expected a non-empty string")
    _check_bool(chk, f"{path}.enabled", entry.get("enabled"))
    model: dict[str, Any] = {"provider": provider, "upstream": upstream}
    if entry.get("name") and entry["name"] != f"{provider}/{upstream}":
        model["name"] = entry["name"]
    for key in ("input_price", "output_price", "cached_input_price"):
        if entry.get(key) is not None:
            model[key] = _num(entry[key])
    if prices_as_of is not None:
        model["prices_as_of"] = prices_as_of
    for key in ("context_window", "max_output_tokens", "rpm", "tpm"):
        if entry.get(key) is not None:
            model[key] = entry[key]
    model["capabilities"] = list(dict.fromkeys(caps)) or ["text"]
    if strengths:
        model["strengths"] = list(dict.fromkeys(strengths))
    model.update(_parse_endpoints(chk, path, entry))
    if model_class != "general":
        model["model_class"] = model_class
    if entry.get("enabled") is False:
        model["enabled"] = False
    return model


def _parse_endpoints(chk: _Checker, path: str, entry: dict[str, Any]) -> dict[str, Any]:
    """A model's ``endpoints`` and, for an embedding model, its ``dimensions`` and ``family`` (those not default)."""
    endpoints = entry.get("endpoints", ["chat"])
    if not isinstance(endpoints, list) or not endpoints or any(e not in ENDPOINTS for e in endpoints):
        chk.add(f"{path}.endpoints", f"expected a list of {', '.join(ENDPOINTS)}, got {endpoints!r}")
        endpoints = ["chat"]
    _check_number(chk, f"{path}.dimensions", entry.get("dimensions"), minimum=1, integer=True)
    family = entry.get("family", "")
    if not isinstance(family, str):
        chk.add(f"{path}.family", f"expected a string, got {type(family).__name__}")
        family = ""
    for field_name, problem in embedding_field_problems(endpoints, entry.get("dimensions"), family).items():
        chk.add(f"{path}.{field_name}", problem)
    out: dict[str, Any] = {}
    if list(dict.fromkeys(endpoints)) != ["chat"]:
        out["endpoints"] = list(dict.fromkeys(endpoints))
    if entry.get("dimensions") is not None:
        out["dimensions"] = entry["dimensions"]
    if family.strip():
        out["family"] = family.strip()
    return out


def carried_strengths(models: list[dict[str, Any]], model_names: list[Any]) -> set[str]:
    """Every tag a model carries once the file is applied: the file's models, and the others as stored."""
    carried = {tag for entry in models for tag in entry.get("strengths", ())}
    others = m.ProviderModel.objects.exclude(name__in=[n for n in model_names if isinstance(n, str)])
    for tags in others.values_list("strengths", flat=True):
        carried.update(tag for tag in tags or () if isinstance(tag, str))
    return carried


def apply_models(canonical: Mapping[str, Any], before: Mapping[str, Any]) -> None:
    """Create or update the file's models (unchanged ones are skipped); their providers exist by now."""
    providers = {p.name: p for p in m.Provider.objects.all()}
    for entry in canonical.get(SECTION, []):
        if entry in before.get(SECTION, []):
            continue
        m.ProviderModel.objects.update_or_create(
            name=model_name(entry),
            defaults={
                "provider": providers[entry["provider"]],
                "upstream": entry["upstream"],
                "input_price": decimal_in(entry.get("input_price")),
                "output_price": decimal_in(entry.get("output_price")),
                "cached_input_price": decimal_in(entry.get("cached_input_price")),
                "prices_as_of": date_in(entry.get("prices_as_of")),
                "context_window": entry.get("context_window"),
                "max_output_tokens": entry.get("max_output_tokens"),
                "rpm": entry.get("rpm"),
                "tpm": entry.get("tpm"),
                "capabilities": entry.get("capabilities", ["text"]),
                "strengths": entry.get("strengths", []),
                "endpoints": entry.get("endpoints", ["chat"]),
                "dimensions": entry.get("dimensions"),
                "family": entry.get("family", ""),
                "model_class": entry.get("model_class", "general"),
                "enabled": entry.get("enabled", True),
            },
        )


def prune_models(canonical: Mapping[str, Any]) -> None:
    m.ProviderModel.objects.exclude(name__in=[model_name(e) for e in canonical.get(SECTION, [])]).delete()


def model_entries() -> list[dict[str, Any]]:
    """The configured models in canonical form, in the order they were created."""
    return [_model_entry(x) for x in m.ProviderModel.objects.select_related("provider").order_by("id")]


def _model_entry(model: m.ProviderModel) -> dict[str, Any]:
    entry: dict[str, Any] = {"provider": model.provider.name, "upstream": model.upstream}
    if model.name != f"{model.provider.name}/{model.upstream}":
        entry["name"] = model.name
    for key in ("input_price", "output_price", "cached_input_price"):
        value = getattr(model, key)
        if value is not None:
            entry[key] = float_out(value)
    if model.prices_as_of is not None:
        entry["prices_as_of"] = model.prices_as_of.isoformat()
    for key in ("context_window", "max_output_tokens", "rpm", "tpm"):
        if getattr(model, key) is not None:
            entry[key] = getattr(model, key)
    entry["capabilities"] = list(model.capabilities or ["text"])
    if model.strengths:
        entry["strengths"] = list(model.strengths)
    if list(model.endpoints or ["chat"]) != ["chat"]:
        entry["endpoints"] = list(model.endpoints)
    if model.dimensions is not None:
        entry["dimensions"] = model.dimensions
    if model.family:
        entry["family"] = model.family
    if model.model_class != "general":
        entry["model_class"] = model.model_class
    if not model.enabled:
        entry["enabled"] = False
    return entry


def compile_models(enabled_providers: set[str]) -> list[ModelSpec]:
    """Every model as the request path sees it; one on a disabled or missing provider is disabled."""
    return [
        ModelSpec(
            name=row.name,
            provider=row.provider.name,
            upstream=row.upstream,
            input_price=float_out(row.input_price),
            output_price=float_out(row.output_price),
            cached_input_price=float_out(row.cached_input_price),
            context_window=row.context_window,
            max_output_tokens=row.max_output_tokens,
            capabilities=frozenset(row.capabilities or ["text"]),
            model_class=row.model_class,
            enabled=row.enabled and row.provider.name in enabled_providers,
            rpm=row.rpm,
            tpm=row.tpm,
            strengths=frozenset(row.strengths or []),
            endpoints=frozenset(row.endpoints or ["chat"]),
            dimensions=row.dimensions,
            family=row.family,
        )
        for row in m.ProviderModel.objects.select_related("provider")
    ]
