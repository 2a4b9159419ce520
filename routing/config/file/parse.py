"""Reading the configuration file and checking it whole into its canonical form.

Each section's module parses its own entries (routing.config.file.providers, .provider_models ...) in the order below,
since a later section refers to the names of an earlier one; the checks across sections come last
(routing.config.file.cross_checks). The canonical form leaves out values equal to their defaults. Errors name the
path of the offending entry, e.g. ``virtual_models[2].targets[0].model: unknown model "x"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from routing.config.file import cross_checks
from routing.config.file.caches import parse_caches
from routing.config.file.category_routes import parse_category_routes
from routing.config.file.checks import _Checker
from routing.config.file.contracts import contract_names, parse_contracts
from routing.config.file.policies import parse_routing_policies
from routing.config.file.provider_models import carried_strengths, model_name, parse_models
from routing.config.file.providers import parse_providers, provider_kinds
from routing.config.file.routing_settings import parse_routing_settings
from routing.config.file.schema import SECTIONS, ConfigError
from routing.config.file.teams import parse_teams
from routing.config.file.tier_routes import parse_tier_routes
from routing.config.file.virtual_models import parse_virtual_models


def read_config_file(path: str) -> dict[str, Any]:
    """The parsed YAML of ``path``; ConfigError for a missing, unreadable or malformed file."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except FileNotFoundError:
        raise ConfigError([f"{path}: no such file"]) from None
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read ({exc.strerror})"]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError([f"{path}: malformed YAML{where}: {problem}"]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError([f"{path}: the top level must be a mapping with {', '.join(SECTIONS)}"])
    return data


def parse_config(data: Mapping[str, Any]) -> dict[str, Any]:
    """The canonical form of ``data``; ConfigError listing every problem, each with its path."""
    chk = _Checker()
    for key in data:
        if key not in SECTIONS:
            chk.add(str(key), f"unknown section (expected {', '.join(SECTIONS)})")

    providers = parse_providers(chk, data)
    contracts = parse_contracts(chk, data)
    contracts_known = contract_names(contracts)
    models = parse_models(chk, data, provider_kinds(providers))
    model_names = [model_name(entry) for entry in models]
    virtual = parse_virtual_models(chk, data, contracts_known)
    routes = parse_tier_routes(chk, data, contracts_known)
    teams = parse_teams(chk, data)
    category_routes = parse_category_routes(chk, data, contracts_known)
    policies = parse_routing_policies(chk, data, carried=carried_strengths(models, model_names))
    settings_out = parse_routing_settings(chk, data)

    cross_checks.check_names_and_graph(chk, model_names, virtual, routes)
    if not chk.problems:  # the graph is sound: the leaves of each virtual model can be walked
        cross_checks.check_embedding_targets(chk, models, virtual)
        cross_checks.check_embedding_providers(chk, models, providers)
    cross_checks.check_category_route_targets(chk, category_routes, model_names, virtual, routes)
    sources = {v["source"] for v in virtual if isinstance(v["source"], str)}
    cross_checks.check_slash_free_aliases(chk, model_names, {*sources, *routes, *category_routes})

    caches = parse_caches(chk, data, callable_names={
        *(n for n in model_names if isinstance(n, str)), *sources, *routes, *category_routes},
        embedding_names=cross_checks.file_embedders(models, model_names, virtual))

    if chk.problems:
        raise ConfigError(chk.problems)
    sections: dict[str, Any] = {
        "providers": providers, "models": models, "virtual_models": virtual, "tier_routes": routes,
        "category_routes": category_routes, "routing_policies": policies, "contracts": contracts, "teams": teams,
        "caches": caches, "settings": settings_out,
    }
    return {section: sections[section] for section in SECTIONS if sections[section]}
