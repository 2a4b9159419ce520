"""Dumping the database's routing configuration back to the file's canonical form and to YAML.

Each section's module reads its own rows back (routing.config.file.providers, .provider_models ...). Values equal
to their defaults are left out, so ``dump -> load -> dump`` is equal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import yaml

from routing.config.file import (
    caches,
    category_routes,
    contracts,
    policies,
    provider_models,
    providers,
    routing_settings,
    teams,
    tier_routes,
    virtual_models,
)
from routing.config.file.schema import SECTIONS

# Each section's canonical entries as configured, by section name.
_ENTRIES: dict[str, Callable[[], Any]] = {
    providers.SECTION: providers.provider_entries,
    provider_models.SECTION: provider_models.model_entries,
    virtual_models.SECTION: virtual_models.virtual_model_entries,
    tier_routes.SECTION: tier_routes.tier_route_entries,
    category_routes.SECTION: category_routes.category_route_entries,
    policies.SECTION: policies.routing_policy_entries,
    contracts.SECTION: contracts.contract_entries,
    teams.SECTION: teams.team_entries,
    caches.SECTION: caches.cache_entries,
    routing_settings.SECTION: routing_settings.routing_settings_entries,
}


def dump_config() -> dict[str, Any]:
    """The whole routing configuration in the declarative file's canonical form (no secrets in it).

    Entries come in the order they were created, so a file loaded into an empty database dumps back in
    its own order.
    """
    out: dict[str, Any] = {}
    for section in SECTIONS:
        value = _ENTRIES[section]()
        if value:
            out[section] = value
    return out


def dump_yaml(config: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(config), sort_keys=False, allow_unicode=True, default_flow_style=False)
