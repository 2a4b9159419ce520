"""Applying a canonical configuration to the database atomically.

Loading the same file twice changes nothing: unchanged entries are skipped, and an apply that changes
nothing writes nothing and does not move the version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from routing.config import versioning
from routing.config.file.caches import apply_caches
from routing.config.file.category_routes import apply_category_routes, prune_category_routes
from routing.config.file.contracts import apply_contracts, contract_rows, prune_contracts
from routing.config.file.dump import dump_config
from routing.config.file.policies import apply_routing_policies, prune_routing_policies
from routing.config.file.provider_models import apply_models, prune_models
from routing.config.file.providers import apply_providers, prune_providers
from routing.config.file.routing_settings import apply_routing_settings
from routing.config.file.teams import apply_teams
from routing.config.file.tier_routes import apply_tier_routes, prune_tier_routes
from routing.config.file.virtual_models import apply_virtual_models, prune_virtual_models


@dataclass(frozen=True)
class ApplyResult:
    changed: bool
    version: int


def apply_config(canonical: Mapping[str, Any], *, author: str, prune: bool = False) -> ApplyResult:
    """Upsert ``canonical`` (from parse_config) in one transaction; nothing is half-applied.

    Entries in the file are created or updated; entries not in the file stay unless ``prune`` is set. When
    the result equals what was there before, nothing is written and the version does not move.
    """
    with transaction.atomic(), versioning.config_author(author, source="file"):
        before = dump_config()
        _apply(canonical, before, prune=prune)
        after = dump_config()
        changed = after != before
        if changed:
            version = versioning.flush()
        else:
            transaction.set_rollback(True)
            versioning.discard_pending()
    if not changed:
        return ApplyResult(changed=False, version=versioning.current_version())
    return ApplyResult(changed=True, version=version)


def _apply(canonical: Mapping[str, Any], before: Mapping[str, Any], *, prune: bool) -> None:
    """Each section in turn, the rows others refer to first; pruning goes the other way round."""
    apply_contracts(canonical, before)
    apply_providers(canonical, before)
    apply_models(canonical, before)
    contracts = contract_rows()
    apply_virtual_models(canonical, before, contracts)
    apply_tier_routes(canonical, before, contracts)
    apply_teams(canonical, before, prune=prune)
    apply_category_routes(canonical, before, contracts)
    apply_routing_policies(canonical, before)
    apply_caches(canonical, before, prune=prune)
    apply_routing_settings(canonical, before, prune=prune)
    if prune:
        prune_tier_routes(canonical)
        prune_category_routes(canonical)
        prune_routing_policies(canonical)
        prune_virtual_models(canonical)
        prune_models(canonical)
        prune_providers(canonical)
        prune_contracts(canonical)
