"""The declarative configuration file: parse and check it whole, apply it atomically, dump it back.

The canonical form leaves out values equal to their defaults, so ``dump -> load -> dump`` is equal and
loading the same file twice changes nothing. Errors name the path of the offending entry, e.g.
``virtual_models[2].targets[0].model: unknown model "x"``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import yaml
from django.core.exceptions import ValidationError
from django.db import transaction

from gomodel_site.settings import provider_secret
from routing import models as m
from routing.core.graph import check_virtual_graph
from routing.core.table import CAPABILITIES, PROVIDER_KINDS, STRATEGIES

SECTIONS = ("providers", "models", "virtual_models", "tier_routes", "contracts", "settings")
SETTINGS_FIELDS = {
    "smart_routing_enabled": bool,
    "smart_routing_threshold": int,
    "smart_routing_session_ttl_seconds": int,
    "smart_routing_keywords": list,
    "routing_enabled": bool,
    "routing_objective": str,
    "min_weight_fraction": float,
    "cooldown_base_seconds": float,
    "cooldown_max_seconds": float,
    "warm_cache_weight": float,
    "warm_cache_ttl_seconds": float,
}


class ConfigError(Exception):
    """A configuration file that cannot be applied; ``problems`` lists every ``path: message``."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass
class _Checker:
    problems: list[str] = field(default_factory=list)

    def add(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")


# ----------------------------------------------------------------------------------------------------------
# Reading
# ----------------------------------------------------------------------------------------------------------


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


def _num(value: Any) -> float | None:
    if value is None:
        return None
    return float(value)


def _decimal_out(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


def _check_name(chk: _Checker, path: str, value: Any) -> bool:
    if not isinstance(value, str) or not m.NAME_PATTERN.match(value):
        chk.add(path, f"{value!r} is not a valid name (letters, digits and . _ : / @ + -)")
        return False
    return True


def _check_number(chk: _Checker, path: str, value: Any, *, minimum: float = 0, integer: bool = False) -> None:
    if value is None:
        return
    kind_ok = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not kind_ok:
        chk.add(path, f"expected {'an integer' if integer else 'a number'}, got {value!r}")
    elif value < minimum:
        chk.add(path, f"must be at least {minimum:g}, got {value!r}")


def _check_bool(chk: _Checker, path: str, value: Any) -> None:
    if value is not None and not isinstance(value, bool):
        chk.add(path, f"expected true or false, got {value!r}")


def _check_unknown_keys(chk: _Checker, path: str, entry: Mapping[str, Any], allowed: Iterable[str]) -> None:
    allowed = set(allowed)
    for key in entry:
        if key not in allowed:
            chk.add(f"{path}.{key}", f"unknown field (expected one of {', '.join(sorted(allowed))})")


def _as_list(chk: _Checker, data: Mapping[str, Any], section: str) -> list[Any]:
    value = data.get(section) or []
    if not isinstance(value, list):
        chk.add(section, "expected a list")
        return []
    return value


def parse_config(data: Mapping[str, Any]) -> dict[str, Any]:
    """The canonical form of ``data``; ConfigError listing every problem, each with its path."""
    chk = _Checker()
    for key in data:
        if key not in SECTIONS:
            chk.add(str(key), f"unknown section (expected {', '.join(SECTIONS)})")
    out: dict[str, Any] = {}

    providers: list[dict[str, Any]] = []
    for i, entry in enumerate(_as_list(chk, data, "providers")):
        path = f"providers[{i}]"
        if not isinstance(entry, dict):
            chk.add(path, "expected a mapping")
            continue
        _check_unknown_keys(chk, path, entry, ("name", "kind", "base_url", "api_key", "api_keys", "api_version",
                                               "timeout_seconds", "enabled"))
        _check_name(chk, f"{path}.name", entry.get("name"))
        if entry.get("kind") not in PROVIDER_KINDS:
            chk.add(f"{path}.kind", f"unknown kind {entry.get('kind')!r} (expected {', '.join(PROVIDER_KINDS)})")
        base_url = entry.get("base_url")
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            chk.add(f"{path}.base_url", f"expected an http(s) URL, got {base_url!r}")
        if entry.get("kind") == "azure_openai" and not entry.get("api_version"):
            chk.add(f"{path}.api_version", "Azure OpenAI needs an api_version, e.g. 2024-10-21")
        keys: list[str] = []
        if "api_key" in entry and "api_keys" in entry:
            chk.add(path, "give api_key or api_keys, not both")
        raw_keys = entry.get("api_keys", [entry["api_key"]] if entry.get("api_key") is not None else [])
        if not isinstance(raw_keys, list):
            chk.add(f"{path}.api_keys", "expected a list of ${VAR} references")
            raw_keys = []
        for k, ref in enumerate(raw_keys):
            kpath = f"{path}.api_key" if "api_key" in entry else f"{path}.api_keys[{k}]"
            var = m.env_reference_name(ref) if isinstance(ref, str) else None
            if var is None:
                # Never echo the value: it may be a raw key pasted by mistake.
                chk.add(kpath, "expected a reference to an environment variable such as ${OPENAI_API_KEY}; "
                               "raw keys are not accepted")
            elif provider_secret(var) is None:
                chk.add(kpath, f"environment variable {var} is not set")
            else:
                keys.append(ref.strip())
        _check_number(chk, f"{path}.timeout_seconds", entry.get("timeout_seconds"), minimum=1, integer=True)
        _check_bool(chk, f"{path}.enabled", entry.get("enabled"))
        provider = {"name": entry.get("name"), "kind": entry.get("kind"), "base_url": base_url}
        if len(keys) == 1 and "api_key" in entry:
            provider["api_key"] = keys[0]
        elif keys:
            provider["api_keys"] = keys
        if entry.get("api_version"):
            provider["api_version"] = str(entry["api_version"])
        if entry.get("timeout_seconds", 600) != 600:
            provider["timeout_seconds"] = entry["timeout_seconds"]
        if entry.get("enabled") is False:
            provider["enabled"] = False
        providers.append(provider)
    _check_duplicates(chk, "providers", [p["name"] for p in providers], "name")
    provider_names = {p["name"] for p in providers} | set(m.Provider.objects.values_list("name", flat=True))

    contracts: list[dict[str, Any]] = []
    for i, entry in enumerate(_as_list(chk, data, "contracts")):
        path = f"contracts[{i}]"
        if not isinstance(entry, dict):
            chk.add(path, "expected a mapping")
            continue
        contracts.append(_parse_contract(chk, path, entry))
    _check_duplicates(chk, "contracts", [c["workload"] for c in contracts], "workload")
    contract_names = {c["workload"] for c in contracts} | set(m.Contract.objects.values_list("workload", flat=True))

    models_out: list[dict[str, Any]] = []
    for i, entry in enumerate(_as_list(chk, data, "models")):
        path = f"models[{i}]"
        if not isinstance(entry, dict):
            chk.add(path, "expected a mapping")
            continue
        _check_unknown_keys(chk, path, entry, ("provider", "upstream", "name", "input_price", "output_price",
                                               "cached_input_price", "context_window", "max_output_tokens",
                                               "capabilities", "model_class", "enabled"))
        provider = entry.get("provider")
        if provider not in provider_names:
            chk.add(f"{path}.provider", f'unknown provider "{provider}"')
        upstream = entry.get("upstream")
        if not isinstance(upstream, str) or not upstream.strip():
            chk.add(f"{path}.upstream", "expected the provider's model name")
            upstream = ""
        name = entry.get("name") or f"{provider}/{upstream}"
        _check_name(chk, f"{path}.name", name)
        for price in ("input_price", "output_price", "cached_input_price"):
            _check_number(chk, f"{path}.{price}", entry.get(price))
        for size in ("context_window", "max_output_tokens"):
            _check_number(chk, f"{path}.{size}", entry.get(size), minimum=1, integer=True)
        caps = entry.get("capabilities", ["text"])
        if not isinstance(caps, list) or any(c not in CAPABILITIES for c in caps):
            chk.add(f"{path}.capabilities", f"expected a list of {', '.join(CAPABILITIES)}, got {caps!r}")
            caps = ["text"]
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
        for key in ("context_window", "max_output_tokens"):
            if entry.get(key) is not None:
                model[key] = entry[key]
        model["capabilities"] = list(dict.fromkeys(caps)) or ["text"]
        if model_class != "general":
            model["model_class"] = model_class
        if entry.get("enabled") is False:
            model["enabled"] = False
        models_out.append(model)
    model_names = [mo.get("name") or f"{mo['provider']}/{mo['upstream']}" for mo in models_out]
    _check_duplicates(chk, "models", model_names, "name")

    virtual: list[dict[str, Any]] = []
    for i, entry in enumerate(_as_list(chk, data, "virtual_models")):
        path = f"virtual_models[{i}]"
        if not isinstance(entry, dict):
            chk.add(path, "expected a mapping")
            continue
        _check_unknown_keys(chk, path, entry, ("source", "strategy", "targets", "session_affinity", "contract",
                                               "enabled"))
        _check_name(chk, f"{path}.source", entry.get("source"))
        strategy = entry.get("strategy", "adaptive")
        if strategy not in STRATEGIES:
            chk.add(f"{path}.strategy", f'unknown strategy "{strategy}" (expected {", ".join(STRATEGIES)})')
        if entry.get("contract") is not None and entry["contract"] not in contract_names:
            chk.add(f"{path}.contract", f'unknown contract "{entry["contract"]}"')
        _check_bool(chk, f"{path}.session_affinity", entry.get("session_affinity"))
        _check_bool(chk, f"{path}.enabled", entry.get("enabled"))
        targets_in = entry.get("targets")
        if not isinstance(targets_in, list) or not targets_in:
            chk.add(f"{path}.targets", "expected a non-empty list of {model, weight}")
            targets_in = []
        targets: list[dict[str, Any]] = []
        for t, target in enumerate(targets_in):
            tpath = f"{path}.targets[{t}]"
            if isinstance(target, str):
                target = {"model": target}
            if not isinstance(target, dict) or not isinstance(target.get("model"), str):
                chk.add(tpath, "expected {model: name, weight: number}")
                continue
            _check_unknown_keys(chk, tpath, target, ("model", "weight"))
            weight = target.get("weight", 1)
            if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight > 0:
                chk.add(f"{tpath}.weight", f"the weight must be greater than 0, got {weight!r}")
            item: dict[str, Any] = {"model": target["model"]}
            if weight != 1:
                item["weight"] = weight
            targets.append(item)
        names = [t["model"] for t in targets]
        for t, name in enumerate(names):
            if name in names[:t]:
                chk.add(f"{path}.targets[{t}].model", f'"{name}" is listed twice')
        vm: dict[str, Any] = {"source": entry.get("source"), "strategy": strategy, "targets": targets}
        if entry.get("session_affinity") is False:
            vm["session_affinity"] = False
        if entry.get("contract"):
            vm["contract"] = entry["contract"]
        if entry.get("enabled") is False:
            vm["enabled"] = False
        virtual.append(vm)
    _check_duplicates(chk, "virtual_models", [v["source"] for v in virtual], "source")

    routes: dict[str, dict[str, Any]] = {}
    raw_routes = data.get("tier_routes") or {}
    if not isinstance(raw_routes, dict):
        chk.add("tier_routes", 'expected a mapping of alias -> {easy: ..., hard: ...}')
        raw_routes = {}
    for alias, entry in raw_routes.items():
        path = f"tier_routes.{alias}"
        _check_name(chk, path, alias)
        if not isinstance(entry, dict):
            chk.add(path, "expected {easy: model, hard: model}")
            continue
        _check_unknown_keys(chk, path, entry, ("easy", "hard", "contract", "enabled"))
        route: dict[str, Any] = {}
        for tier in ("easy", "hard"):
            if not isinstance(entry.get(tier), str):
                chk.add(f"{path}.{tier}", "expected a model or virtual model name")
            route[tier] = entry.get(tier)
        if entry.get("contract") is not None:
            if entry["contract"] not in contract_names:
                chk.add(f"{path}.contract", f'unknown contract "{entry["contract"]}"')
            route["contract"] = entry["contract"]
        _check_bool(chk, f"{path}.enabled", entry.get("enabled"))
        if entry.get("enabled") is False:
            route["enabled"] = False
        routes[str(alias)] = route

    settings_out: dict[str, Any] = {}
    raw_settings = data.get("settings") or {}
    if not isinstance(raw_settings, dict):
        chk.add("settings", "expected a mapping")
        raw_settings = {}
    for key, value in raw_settings.items():
        if key not in SETTINGS_FIELDS:
            chk.add(f"settings.{key}", f"unknown setting (expected one of {', '.join(SETTINGS_FIELDS)})")
            continue
        if value is None:
            continue
        settings_out[key] = value
    if settings_out:
        row = m.RoutingSettings(**{k: v for k, v in settings_out.items()})
        try:
            row.clean_fields()
            row.clean()
        except ValidationError as exc:
            for fname, messages in exc.message_dict.items():
                for message in messages:
                    chk.add(f"settings.{fname}", message)
        except (TypeError, ValueError) as exc:
            chk.add("settings", str(exc))

    # Names across the three namespaces a client can call, then the graph of virtual models.
    existing_models = set(m.ProviderModel.objects.values_list("name", flat=True))
    existing_virtual = set(m.VirtualModel.objects.values_list("source", flat=True))
    existing_aliases = set(m.TierRoute.objects.values_list("alias", flat=True))
    all_models = existing_models | set(model_names)
    seen: dict[str, str] = {}
    for label, names in (("models", model_names), ("virtual_models", [v["source"] for v in virtual]),
                         ("tier_routes", list(routes))):
        for name in names:
            if name in seen and seen[name] != label:
                chk.add(label, f'the public name "{name}" is already used in {seen[name]}')
            seen.setdefault(name, label)
    aliases = existing_aliases | set(routes)
    for i, vm in enumerate(virtual):
        if vm["source"] in all_models:
            chk.add(f"virtual_models[{i}].source", f'"{vm["source"]}" is already a model name')
        elif vm["source"] in aliases:
            chk.add(f"virtual_models[{i}].source", f'"{vm["source"]}" is already a tier alias')
    edges: dict[str, list[str]] = {
        vm.source: [t.target for t in vm.targets.all()] for vm in m.VirtualModel.objects.prefetch_related("targets")
    }
    edges.update({v["source"]: [t["model"] for t in v["targets"]] for v in virtual if isinstance(v["source"], str)})
    index = {v["source"]: i for i, v in enumerate(virtual)}
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

    if chk.problems:
        raise ConfigError(chk.problems)
    if providers:
        out["providers"] = providers
    if models_out:
        out["models"] = models_out
    if virtual:
        out["virtual_models"] = virtual
    if routes:
        out["tier_routes"] = routes
    if contracts:
        out["contracts"] = contracts
    if settings_out:
        out["settings"] = settings_out
    return out


def _check_duplicates(chk: _Checker, section: str, names: list[Any], key: str) -> None:
    for i, name in enumerate(names):
        if name in names[:i]:
            chk.add(f"{section}[{i}].{key}", f'"{name}" appears twice')


def _parse_contract(chk: _Checker, path: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    _check_unknown_keys(chk, path, entry, ("workload", "modalities", "max_input_tokens", "requires_tools",
                                           "structured_output", "allowed_model_classes", "max_cost_usd",
                                           "deadline_ms", "required_finish_reason", "min_output_chars",
                                           "validator"))
    _check_name(chk, f"{path}.workload", entry.get("workload"))
    out: dict[str, Any] = {"workload": entry.get("workload")}
    modalities = entry.get("modalities", ["text"])
    if not isinstance(modalities, list) or any(x not in m.MODALITIES for x in modalities):
        chk.add(f"{path}.modalities", f"expected a list of {', '.join(m.MODALITIES)}, got {modalities!r}")
    else:
        out["modalities"] = modalities
    for key, minimum in (("max_input_tokens", 1), ("deadline_ms", 100), ("min_output_chars", 0)):
        _check_number(chk, f"{path}.{key}", entry.get(key), minimum=minimum, integer=True)
        if entry.get(key) is not None:
            out[key] = entry[key]
    _check_bool(chk, f"{path}.requires_tools", entry.get("requires_tools"))
    if entry.get("requires_tools"):
        out["requires_tools"] = True
    structured = entry.get("structured_output")
    if structured is not None:
        if not isinstance(structured, dict):
            chk.add(f"{path}.structured_output", "expected {required, schema, strict}")
        else:
            _check_unknown_keys(chk, f"{path}.structured_output", structured, ("required", "schema", "strict"))
            _check_bool(chk, f"{path}.structured_output.required", structured.get("required"))
            _check_bool(chk, f"{path}.structured_output.strict", structured.get("strict"))
            schema = structured.get("schema")
            try:
                m.validate_json_schema(schema)
            except ValidationError as exc:
                chk.add(f"{path}.structured_output.schema", exc.messages[0])
            if structured.get("required") and not schema:
                chk.add(f"{path}.structured_output.schema", "structured output is required, so a schema is needed")
            so: dict[str, Any] = {"required": bool(structured.get("required"))}
            if schema:
                so["schema"] = schema
            if structured.get("strict"):
                so["strict"] = True
            out["structured_output"] = so
    classes = entry.get("allowed_model_classes")
    if classes is not None:
        if not isinstance(classes, list) or not all(isinstance(c, str) and c for c in classes):
            chk.add(f"{path}.allowed_model_classes", "expected a list of model class names")
        elif classes:
            out["allowed_model_classes"] = classes
    _check_number(chk, f"{path}.max_cost_usd", entry.get("max_cost_usd"))
    if entry.get("max_cost_usd") is not None:
        out["max_cost_usd"] = _num(entry["max_cost_usd"])
    reason = entry.get("required_finish_reason")
    if reason is not None:
        if reason not in m.FINISH_REASONS:
            chk.add(f"{path}.required_finish_reason", f"expected one of {', '.join(m.FINISH_REASONS)}")
        out["required_finish_reason"] = reason
    if entry.get("validator"):
        from routing.validators_registry import resolve_validator

        try:
            resolve_validator(str(entry["validator"]))
        except ValueError as exc:
            chk.add(f"{path}.validator", str(exc))
        out["validator"] = str(entry["validator"])
    return out


# ----------------------------------------------------------------------------------------------------------
# Dumping
# ----------------------------------------------------------------------------------------------------------


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
    if not provider.enabled:
        entry["enabled"] = False
    return entry


def _model_entry(model: m.ProviderModel) -> dict[str, Any]:
    entry: dict[str, Any] = {"provider": model.provider.name, "upstream": model.upstream}
    if model.name != f"{model.provider.name}/{model.upstream}":
        entry["name"] = model.name
    for key in ("input_price", "output_price", "cached_input_price"):
        value = getattr(model, key)
        if value is not None:
            entry[key] = _decimal_out(value)
    for key in ("context_window", "max_output_tokens"):
        if getattr(model, key) is not None:
            entry[key] = getattr(model, key)
    entry["capabilities"] = list(model.capabilities or ["text"])
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
    if vm.contract_id:
        entry["contract"] = vm.contract.workload  # type: ignore[union-attr]
    if not vm.enabled:
        entry["enabled"] = False
    return entry


def _route_entry(route: m.TierRoute) -> dict[str, Any]:
    entry: dict[str, Any] = {"easy": route.easy, "hard": route.hard}
    if route.contract_id:
        entry["contract"] = route.contract.workload  # type: ignore[union-attr]
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
    contracts = [_contract_entry(c) for c in m.Contract.objects.order_by("id")]
    settings_ = _settings_entry()
    for key, value in (("providers", providers), ("models", models_), ("virtual_models", virtual),
                       ("tier_routes", routes), ("contracts", contracts), ("settings", settings_)):
        if value:
            out[key] = value
    return out


def dump_yaml(config: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(config), sort_keys=False, allow_unicode=True, default_flow_style=False)


# ----------------------------------------------------------------------------------------------------------
# Applying
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ApplyResult:
    changed: bool
    version: int


def apply_config(canonical: Mapping[str, Any], *, author: str, prune: bool = False) -> ApplyResult:
    """Upsert ``canonical`` (from parse_config) in one transaction; nothing is half-applied.

    Entries in the file are created or updated; entries not in the file stay unless ``prune`` is set. When
    the result equals what was there before, nothing is written and the version does not move.
    """
    from routing import versioning

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
                "context_window": entry.get("context_window"),
                "max_output_tokens": entry.get("max_output_tokens"),
                "capabilities": entry.get("capabilities", ["text"]),
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
        m.VirtualModel.objects.exclude(source__in=[v["source"] for v in canonical.get("virtual_models", [])]).delete()
        keep_models = [e.get("name") or f"{e['provider']}/{e['upstream']}" for e in canonical.get("models", [])]
        m.ProviderModel.objects.exclude(name__in=keep_models).delete()
        m.Provider.objects.exclude(name__in=[p["name"] for p in canonical.get("providers", [])]).delete()
        m.Contract.objects.exclude(workload__in=list(contracts)).delete()


def _decimal_in(value: float | None) -> Decimal | None:
    return None if value is None else Decimal(str(value))


def load_config_file(path: str, *, author: str, prune: bool = False) -> ApplyResult:
    """Read, check and apply ``path``; ConfigError naming every problem, and nothing applied then."""
    data = read_config_file(path)
    canonical = parse_config(data)
    return apply_config(canonical, author=author, prune=prune)
