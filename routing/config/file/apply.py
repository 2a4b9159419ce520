"""Applying a canonical configuration to the database atomically.

Loading the same file twice changes nothing: unchanged entries are skipped, and an apply that changes
nothing writes nothing and does not move the version.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import transaction

from routing import models as m
from routing.config.file.caches import apply_caches
from routing.config.file.category_routes import apply_category_routes, prune_category_routes
from routing.config.file.dump import dump_config
from routing.config.file.policies import apply_routing_policies, prune_routing_policies
from routing.config.file.schema import SETTINGS_FIELDS
from routing.config.file.teams import apply_teams
from routing.config.provider_cloud import CLOUD_FIELDS
from routing.config.provider_egress import EGRESS_FIELDS


@dataclass(frozen=True)
class ApplyResult:
    changed: bool
    version: int


def apply_config(canonical: Mapping[str, Any], *, author: str, prune: bool = False) -> ApplyResult:
    """Upsert ``canonical`` (from parse_config) in one transaction; nothing is half-applied.

    Entries in the file are created or updated; entries not in the file stay unless ``prune`` is set. When
    the result equals what was there before, nothing is written and the version does not move.
    """
    from routing.config import versioning

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
    contracts = {c["workload"]: c for c in canonical.get("contracts", [])}
    for workload, entry in contracts.items():
        if entry in before.get("contracts", []):
            continue
        so = entry.get("structured_output", {})
        values = {
            "modalities": entry.get("modalities", []),
            "max_input_tokens": entry.get("max_input_tokens"),
            "requires_tools": entry.get("requires_tools", False),
            "structured_output_required": so.get("required", False),
            "schema": so.get("schema"),
            "strict": so.get("strict", False),
            "allowed_model_classes": entry.get("allowed_model_classes", []),
            "max_cost_usd": None if entry.get("max_cost_usd") is None else Decimal(str(entry["max_cost_usd"])),
            "deadline_ms": entry.get("deadline_ms"),
            "required_finish_reason": entry.get("required_finish_reason", ""),
            "min_output_chars": entry.get("min_output_chars"),
            "validator": entry.get("validator", ""),
        }
        m.Contract.objects.update_or_create(workload=workload, defaults=values)

    for entry in canonical.get("providers", []):
        if entry in before.get("providers", []):
            continue
        provider, _ = m.Provider.objects.update_or_create(
            name=entry["name"],
            defaults={
                "kind": entry["kind"],
                "base_url": entry["base_url"],
                "api_version": entry.get("api_version", ""),
                "timeout_seconds": entry.get("timeout_seconds", 600),
                "enabled": entry.get("enabled", True),
                "probe": entry.get("probe", ""),
                "allowed_betas": entry.get("allowed_betas", []),
                **{name: entry.get(name, "") for name in (*EGRESS_FIELDS, *CLOUD_FIELDS)},
            },
        )
        refs = entry.get("api_keys") or ([entry["api_key"]] if "api_key" in entry else [])
        if [k.reference for k in provider.keys.all()] != refs:
            provider.keys.all().delete()
            for position, ref in enumerate(refs):
                m.ProviderKey.objects.create(provider=provider, reference=ref, position=position)

    providers = {p.name: p for p in m.Provider.objects.all()}
    for entry in canonical.get("models", []):
        if entry in before.get("models", []):
            continue
        name = entry.get("name") or f"{entry['provider']}/{entry['upstream']}"
        m.ProviderModel.objects.update_or_create(
            name=name,
            defaults={
                "provider": providers[entry["provider"]],
                "upstream": entry["upstream"],
                "input_price": _decimal_in(entry.get("input_price")),
                "output_price": _decimal_in(entry.get("output_price")),
                "cached_input_price": _decimal_in(entry.get("cached_input_price")),
                "prices_as_of": _date_in(entry.get("prices_as_of")),
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

    contract_rows = {c.workload: c for c in m.Contract.objects.all()}
    for entry in canonical.get("virtual_models", []):
        if entry in before.get("virtual_models", []):
            continue
        vm, _ = m.VirtualModel.objects.update_or_create(
            source=entry["source"],
            defaults={
                "strategy": entry["strategy"],
                "session_affinity": entry.get("session_affinity", True),
                "contract": contract_rows.get(entry.get("contract", "")),
                "enabled": entry.get("enabled", True),
            },
        )
        vm.targets.all().delete()
        for position, target in enumerate(entry["targets"]):
            m.VirtualModelTarget.objects.create(
                virtual_model=vm, position=position, target=target["model"], weight=float(target.get("weight", 1))
            )

    for alias, entry in canonical.get("tier_routes", {}).items():
        if before.get("tier_routes", {}).get(alias) == entry:
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

    apply_teams(canonical.get("teams", []), before.get("teams", []), prune=prune)

    apply_category_routes(canonical, before, contract_rows)

    apply_routing_policies(canonical, before)

    apply_caches(canonical, before, prune=prune)

    if "settings" in canonical or prune:
        wanted = canonical.get("settings", {})
        if wanted != before.get("settings", {}):
            row = m.RoutingSettings.load()
            for key in SETTINGS_FIELDS:
                if key in wanted:
                    setattr(row, key, wanted[key])
                elif prune:
                    setattr(row, key, "" if key == "routing_objective" else None)
            row.save()

    if prune:
        m.TierRoute.objects.exclude(alias__in=list(canonical.get("tier_routes", {}))).delete()
        prune_category_routes(canonical)
        prune_routing_policies(canonical)
        m.VirtualModel.objects.exclude(source__in=[v["source"] for v in canonical.get("virtual_models", [])]).delete()
        keep_models = [e.get("name") or f"{e['provider']}/{e['upstream']}" for e in canonical.get("models", [])]
        m.ProviderModel.objects.exclude(name__in=keep_models).delete()
        m.Provider.objects.exclude(name__in=[p["name"] for p in canonical.get("providers", [])]).delete()
        m.Contract.objects.exclude(workload__in=list(contracts)).delete()


def _decimal_in(value: float | None) -> Decimal | None:
    return None if value is None else Decimal(str(value))


def _date_in(value: str | None) -> dt.date | None:
    return None if value is None else dt.date.fromisoformat(value)
