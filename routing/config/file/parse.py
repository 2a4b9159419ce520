"""Reading the configuration file and checking it whole into its canonical form.

The canonical form leaves out values equal to their defaults. Errors name the path of the offending entry,
e.g. ``virtual_models[2].targets[0].model: unknown model "x"``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import yaml
from django.core.exceptions import ValidationError

from routing import models as m
from routing.config.file.caches import configured_embedders, embedding_virtuals, parse_caches
from routing.config.file.category_routes import (
    check_names_against_routes,
    check_targets,
    parse_category_routes,
)
from routing.config.file.checks import (
    _as_list,
    _check_bool,
    _check_duplicates,
    _check_name,
    _check_number,
    _check_unknown_keys,
    _Checker,
    _num,
)
from routing.config.file.contracts import _parse_contract
from routing.config.file.model_prices import catalogue_fill, parse_prices_as_of
from routing.config.file.policies import parse_routing_policies
from routing.config.file.schema import SECTIONS, SETTINGS_FIELDS, ConfigError
from routing.config.file.teams import parse_team
from routing.config.provider_cloud import CLOUD_FIELDS, CLOUD_KINDS, cloud_problems, default_base_url
from routing.config.provider_egress import EGRESS_FIELDS, egress_problems
from routing.config.provider_keys import look_up
from routing.core.categories import CATEGORIES, strength_tag_problem
from routing.core.embeddings import EmbeddingFacts, embedding_field_problems, target_mix_problem
from routing.core.graph import check_virtual_graph
from routing.core.names import alias_collisions
from routing.core.probes import mode_problem
from routing.core.table import CAPABILITIES, ENDPOINTS, PROVIDER_KINDS, STRATEGIES
from routing.providers.anthropic.adapter import beta_names_problem
from routing.providers.embeddings import serves_embeddings
from routing.providers.openai.presets import PRESETS


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
    out: dict[str, Any] = {}

    providers = [_parse_provider(chk, path, entry) for path, entry in _entries(chk, data, "providers")]
    _check_duplicates(chk, "providers", [p["name"] for p in providers], "name")
    # Only names that are strings take part in the cross-checks: any other value is reported already.
    provider_kinds: dict[str, str] = dict(m.Provider.objects.values_list("name", "kind"))
    provider_kinds.update({p["name"]: p["kind"] for p in providers if isinstance(p["name"], str)})

    contracts = [_parse_contract(chk, path, entry) for path, entry in _entries(chk, data, "contracts")]
    _check_duplicates(chk, "contracts", [c["workload"] for c in contracts], "workload")
    contract_names = {c["workload"] for c in contracts if isinstance(c["workload"], str)} | set(
        m.Contract.objects.values_list("workload", flat=True))

    models_out = [_parse_model(chk, path, entry, provider_kinds) for path, entry in _entries(chk, data, "models")]
    model_names = [mo.get("name") or f"{mo['provider']}/{mo['upstream']}" for mo in models_out]
    _check_duplicates(chk, "models", model_names, "name")

    virtual = [_parse_virtual_model(chk, path, entry, contract_names)
               for path, entry in _entries(chk, data, "virtual_models")]
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
        routes[str(alias)] = _parse_route(chk, path, entry, contract_names)

    teams = [parse_team(chk, path, entry) for path, entry in _entries(chk, data, "teams")]
    _check_duplicates(chk, "teams", [t["name"] for t in teams], "name")

    category_routes = parse_category_routes(chk, data, contract_names)
    policies = parse_routing_policies(chk, data, carried=_carried_strengths(models_out, model_names))

    settings_out = _parse_settings(chk, data)
    _check_names_and_graph(chk, model_names, virtual, routes)
    if not chk.problems:  # the graph is sound: the leaves of each virtual model can be walked
        _check_embedding_targets(chk, models_out, virtual)
        _check_embedding_providers(chk, models_out, providers)
    _check_category_routes(chk, category_routes, model_names, virtual, routes)
    _check_slash_free_aliases(chk, model_names, {*(v["source"] for v in virtual if isinstance(v["source"], str)),
                                                 *routes, *category_routes})

    caches = parse_caches(chk, data, callable_names={
        *(n for n in model_names if isinstance(n, str)),
        *(v["source"] for v in virtual if isinstance(v["source"], str)), *routes, *category_routes},
        embedding_names=_file_embedders(models_out, model_names, virtual))

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
    if category_routes:
        out["category_routes"] = category_routes
    if policies:
        out["routing_policies"] = policies
    if contracts:
        out["contracts"] = contracts
    if teams:
        out["teams"] = teams
    if caches:
        out["caches"] = caches
    if settings_out:
        out["settings"] = settings_out
    return out


def _file_embedders(models_out: list[dict[str, Any]], model_names: list[Any],
                    virtual: list[dict[str, Any]]) -> set[str]:
    """The file's names that serve embeddings: models with the endpoint and virtual models of them only."""
    names = {name for name, model in zip(model_names, models_out, strict=True)
             if isinstance(name, str) and "embeddings" in (model.get("endpoints") or [])}
    targets = {str(v["source"]): [str(t.get("model")) for t in v.get("targets") or [] if isinstance(t, dict)]
               for v in virtual if isinstance(v.get("source"), str)}
    return names | embedding_virtuals(names | configured_embedders(), targets)


def _entries(chk: _Checker, data: Mapping[str, Any], section: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(path, entry)`` for each mapping in a list section; any other item is reported by its path."""
    for i, entry in enumerate(_as_list(chk, data, section)):
        path = f"{section}[{i}]"
        if isinstance(entry, dict):
            yield path, entry
        else:
            chk.add(path, "expected a mapping")


def _known(name: Any, names: set[str]) -> bool:
    return isinstance(name, str) and name in names


def _parse_provider(chk: _Checker, path: str, entry: dict[str, Any]) -> dict[str, Any]:
    """One ``providers`` entry; its key references must name variables that may hold a key, and are set."""
    _check_unknown_keys(chk, path, entry, ("name", "kind", "base_url", "api_key", "api_keys", "api_version",
                                           "timeout_seconds", "enabled", "probe", "allowed_betas",
                                           *EGRESS_FIELDS, *CLOUD_FIELDS))
    _check_name(chk, f"{path}.name", entry.get("name"))
    if entry.get("kind") not in PROVIDER_KINDS:
        chk.add(f"{path}.kind", f"unknown kind {entry.get('kind')!r} (expected {', '.join(PROVIDER_KINDS)})")
    cloud = _parse_cloud(chk, path, entry)
    base_url = entry.get("base_url")
    if base_url is None and entry.get("kind") in PRESETS:
        base_url = PRESETS[entry["kind"]].base_url  # a preset's own host, stored so the dump shows it
    if base_url is None and entry.get("kind") in CLOUD_KINDS:
        base_url = default_base_url(entry["kind"], cloud.get("region", "")) or None
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
        elif (problem := look_up(ref).problem) is not None:
            chk.add(kpath, problem)
        else:
            keys.append(ref.strip())
    _check_number(chk, f"{path}.timeout_seconds", entry.get("timeout_seconds"), minimum=1, integer=True)
    _check_bool(chk, f"{path}.enabled", entry.get("enabled"))
    egress = _parse_egress(chk, path, entry)
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
    probe = entry.get("probe")
    if probe is not None:
        problem = mode_problem(str(entry.get("kind")), probe) if isinstance(probe, str) else "expected a string"
        if problem is not None:
            chk.add(f"{path}.probe", problem)
        elif probe:
            provider["probe"] = probe
    provider.update(_parse_betas(chk, path, entry))
    provider.update(egress)
    provider.update(cloud)
    return provider


def _parse_betas(chk: _Checker, path: str, entry: dict[str, Any]) -> dict[str, list[str]]:
    """A provider's ``allowed_betas`` (docs/providers.md), when it lists any."""
    betas = entry.get("allowed_betas")
    if betas is None:
        return {}
    if (problem := beta_names_problem(betas)) is not None:
        chk.add(f"{path}.allowed_betas", problem)
        return {}
    return {"allowed_betas": list(betas)} if betas else {}


def _parse_cloud(chk: _Checker, path: str, entry: dict[str, Any]) -> dict[str, str]:
    """A Bedrock or Vertex AI provider's region, project and credentials (docs/providers.md), the ones set."""
    values: dict[str, str] = {}
    for name in CLOUD_FIELDS:
        value = entry.get(name, "")
        if not isinstance(value, str):
            chk.add(f"{path}.{name}", f"expected a string, got {type(value).__name__}")
        elif value.strip():
            values[name] = value.strip()
    if entry.get("kind") in PROVIDER_KINDS:
        for name, problem in cloud_problems(entry["kind"], values).items():
            chk.add(f"{path}.{name}", problem)
    return values


def _parse_egress(chk: _Checker, path: str, entry: dict[str, Any]) -> dict[str, str]:
    """A provider's ``proxy`` and TLS files (docs/providers.md), the ones that are set."""
    values: dict[str, str] = {}
    for name in EGRESS_FIELDS:
        value = entry.get(name, "")
        if not isinstance(value, str):
            chk.add(f"{path}.{name}", f"expected a string, got {type(value).__name__}")
        elif value.strip():
            values[name] = value.strip()
    for name, problem in egress_problems(**{name: values.get(name, "") for name in EGRESS_FIELDS}).items():
        chk.add(f"{path}.{name}", problem)
    return values


def _parse_model(chk: _Checker, path: str, entry: dict[str, Any], provider_kinds: dict[str, str]) -> dict[str, Any]:
    """One ``models`` entry, whose provider is in the file or already configured (``provider_kinds``: name -> kind).

    With ``prices: catalogue`` the price catalogue fills what the entry leaves out (routing.config.file.model_prices).
    """
    _check_unknown_keys(chk, path, entry, ("provider", "upstream", "name", "input_price", "output_price",
                                           "cached_input_price", "prices", "prices_as_of", "context_window",
                                           "max_output_tokens", "capabilities", "model_class", "enabled", "rpm",
                                           "tpm", "strengths", "endpoints", "dimensions", "family"))
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


def _parse_virtual_model(
        chk: _Checker, path: str, entry: dict[str, Any], contract_names: set[str]) -> dict[str, Any]:
    """One ``virtual_models`` entry and its targets (their names are checked with the graph)."""
    _check_unknown_keys(chk, path, entry, ("source", "strategy", "targets", "session_affinity", "contract",
                                           "enabled"))
    _check_name(chk, f"{path}.source", entry.get("source"))
    strategy = entry.get("strategy", "adaptive")
    if strategy not in STRATEGIES:
        chk.add(f"{path}.strategy", f'unknown strategy "{strategy}" (expected {", ".join(STRATEGIES)})')
    if entry.get("contract") is not None and not _known(entry["contract"], contract_names):
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
    return vm


def _parse_route(chk: _Checker, path: str, entry: dict[str, Any], contract_names: set[str]) -> dict[str, Any]:
    """One ``tier_routes`` entry (its targets are checked with the names)."""
    _check_unknown_keys(chk, path, entry, ("easy", "hard", "contract", "enabled"))
    route: dict[str, Any] = {}
    for tier in ("easy", "hard"):
        if not isinstance(entry.get(tier), str):
            chk.add(f"{path}.{tier}", "expected a model or virtual model name")
        route[tier] = entry.get(tier)
    if entry.get("contract") is not None:
        if not _known(entry["contract"], contract_names):
            chk.add(f"{path}.contract", f'unknown contract "{entry["contract"]}"')
        route["contract"] = entry["contract"]
    _check_bool(chk, f"{path}.enabled", entry.get("enabled"))
    if entry.get("enabled") is False:
        route["enabled"] = False
    return route


def _parse_settings(chk: _Checker, data: Mapping[str, Any]) -> dict[str, Any]:
    """The ``settings`` section, checked by the RoutingSettings model's own validation."""
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
    return settings_out


def _carried_strengths(models_out: list[dict[str, Any]], model_names: list[str]) -> set[str]:
    """Every tag a model carries once the file is applied: the file's models, and the others as stored."""
    carried = {tag for entry in models_out for tag in entry.get("strengths", ())}
    others = m.ProviderModel.objects.exclude(name__in=[n for n in model_names if isinstance(n, str)])
    for tags in others.values_list("strengths", flat=True):
        carried.update(tag for tag in tags or () if isinstance(tag, str))
    return carried


def _check_category_routes(chk: _Checker, category_routes: dict[str, Any], model_names: list[str],
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


def _check_embedding_providers(chk: _Checker, models_out: list[dict[str, Any]],
                               providers: list[dict[str, Any]]) -> None:
    """An embedding model is on a provider kind the gateway can send embeddings to."""
    kinds = dict(m.Provider.objects.values_list("name", "kind"))
    kinds.update({p["name"]: p.get("kind") for p in providers})
    for i, entry in enumerate(models_out):
        kind = kinds.get(entry["provider"])
        if "embeddings" in entry.get("endpoints", ()) and kind is not None and not serves_embeddings(kind):
            chk.add(f"models[{i}].endpoints", f'the provider "{entry["provider"]}" ({kind}) has no embeddings '
                                              f"endpoint the gateway can call")


def _check_embedding_targets(chk: _Checker, models_out: list[dict[str, Any]], virtual: list[dict[str, Any]]) -> None:
    """Each virtual model's models serve one endpoint; embedding models share one family and one size."""
    facts = {row.name: EmbeddingFacts(row.name, frozenset(row.endpoints or ["chat"]), row.dimensions, row.family)
             for row in m.ProviderModel.objects.all()}
    for entry in models_out:
        name = entry.get("name") or f"{entry['provider']}/{entry['upstream']}"
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


def _check_slash_free_aliases(chk: _Checker, model_names: list[str], file_names: set[str]) -> None:
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


def _check_names_and_graph(
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
