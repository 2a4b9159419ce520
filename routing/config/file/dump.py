"""Dumping the database's routing configuration back to the file's canonical form and to YAML.

Values equal to their defaults are left out, so ``dump -> load -> dump`` is equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import yaml

from routing import models as m
from routing.config.file.caches import cache_entries
from routing.config.file.category_routes import category_route_entries
from routing.config.file.policies import routing_policy_entries
from routing.config.file.schema import SETTINGS_FIELDS
from routing.config.file.teams import dump_teams
from routing.config.provider_cloud import CLOUD_FIELDS
from routing.config.provider_egress import EGRESS_FIELDS


def _decimal_out(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


def _provider_entry(provider: m.Provider) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": provider.name, "kind": provider.kind, "base_url": provider.base_url}
    refs = [k.reference for k in provider.keys.all()]
    if len(refs) == 1:
        entry["api_key"] = refs[0]
    elif refs:
        entry["api_keys"] = refs
    if provider.api_version:
        entry["api_version"] = provider.api_version
    if provider.timeout_seconds != 600:
        entry["timeout_seconds"] = provider.timeout_seconds
    if provider.probe:
        entry["probe"] = provider.probe
    if provider.allowed_betas:
        entry["allowed_betas"] = list(provider.allowed_betas)
    if not provider.enabled:
        entry["enabled"] = False
    for name in (*EGRESS_FIELDS, *CLOUD_FIELDS):
        if getattr(provider, name):
            entry[name] = getattr(provider, name)
    return entry


def _model_entry(model: m.ProviderModel) -> dict[str, Any]:
    entry: dict[str, Any] = {"provider": model.provider.name, "upstream": model.upstream}
    if model.name != f"{model.provider.name}/{model.upstream}":
        entry["name"] = model.name
    for key in ("input_price", "output_price", "cached_input_price"):
        value = getattr(model, key)
        if value is not None:
            entry[key] = _decimal_out(value)
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


def _contract_entry(contract: m.Contract) -> dict[str, Any]:
    entry: dict[str, Any] = {"workload": contract.workload}
    if contract.modalities:
        entry["modalities"] = list(contract.modalities)
    for key in ("max_input_tokens", "deadline_ms", "min_output_chars"):
        if getattr(contract, key) is not None:
            entry[key] = getattr(contract, key)
    if contract.requires_tools:
        entry["requires_tools"] = True
    if contract.schema or contract.structured_output_required or contract.strict:
        so: dict[str, Any] = {"required": contract.structured_output_required}
        if contract.schema:
            so["schema"] = contract.schema
        if contract.strict:
            so["strict"] = True
        entry["structured_output"] = so
    if contract.allowed_model_classes:
        entry["allowed_model_classes"] = list(contract.allowed_model_classes)
    if contract.max_cost_usd is not None:
        entry["max_cost_usd"] = _decimal_out(contract.max_cost_usd)
    if contract.required_finish_reason:
        entry["required_finish_reason"] = contract.required_finish_reason
    if contract.validator:
        entry["validator"] = contract.validator
    return entry


def _virtual_entry(vm: m.VirtualModel) -> dict[str, Any]:
    targets = []
    for target in vm.targets.all():
        item: dict[str, Any] = {"model": target.target}
        if target.weight != 1:
            item["weight"] = int(target.weight) if float(target.weight).is_integer() else target.weight
        targets.append(item)
    entry: dict[str, Any] = {"source": vm.source, "strategy": vm.strategy, "targets": targets}
    if not vm.session_affinity:
        entry["session_affinity"] = False
    if vm.contract is not None:
        entry["contract"] = vm.contract.workload
    if not vm.enabled:
        entry["enabled"] = False
    return entry


def _route_entry(route: m.TierRoute) -> dict[str, Any]:
    entry: dict[str, Any] = {"easy": route.easy, "hard": route.hard}
    if route.contract is not None:
        entry["contract"] = route.contract.workload
    if not route.enabled:
        entry["enabled"] = False
    return entry


def _settings_entry() -> dict[str, Any]:
    row = m.RoutingSettings.objects.filter(pk=1).first()
    if row is None:
        return {}
    out: dict[str, Any] = {}
    for key in SETTINGS_FIELDS:
        value = getattr(row, key)
        if value is not None and value != "":
            out[key] = value
    return out


def dump_config() -> dict[str, Any]:
    """The whole routing configuration in the declarative file's canonical form (no secrets in it).

    Entries come in the order they were created, so a file loaded into an empty database dumps back in
    its own order.
    """
    out: dict[str, Any] = {}
    providers = [_provider_entry(p) for p in m.Provider.objects.prefetch_related("keys").order_by("id")]
    models_ = [_model_entry(x) for x in m.ProviderModel.objects.select_related("provider").order_by("id")]
    virtual = [_virtual_entry(v) for v in m.VirtualModel.objects.select_related("contract")
               .prefetch_related("targets").order_by("id")]
    routes = {r.alias: _route_entry(r) for r in m.TierRoute.objects.select_related("contract").order_by("id")}
    category_routes = category_route_entries()
    policies = routing_policy_entries()
    contracts = [_contract_entry(c) for c in m.Contract.objects.order_by("id")]
    settings_ = _settings_entry()
    teams = dump_teams()
    caches = cache_entries()
    for key, value in (("providers", providers), ("models", models_), ("virtual_models", virtual),
                       ("tier_routes", routes), ("category_routes", category_routes),
                       ("routing_policies", policies),
                       ("contracts", contracts), ("teams", teams), ("caches", caches),
                       ("settings", settings_)):
        if value:
            out[key] = value
    return out


def dump_yaml(config: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(config), sort_keys=False, allow_unicode=True, default_flow_style=False)
