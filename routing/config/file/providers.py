"""The ``providers`` section: parse and check it, apply it, dump it back, compile it into the RoutingTable.

A provider names its ``kind`` (routing.core.table.PROVIDER_KINDS), its ``base_url`` (a preset's or a cloud's own
host when left out), its keys as ``${VAR}`` references (``api_key`` or ``api_keys``, never a raw key), and the
optional ``api_version``, ``timeout_seconds`` (600), ``enabled``, ``probe``, ``allowed_betas``, egress
(``proxy`` and TLS files) and cloud fields (docs/providers.md).
"""

from __future__ import annotations

import logging
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
)
from routing.config.provider_cloud import (
    AWS_REFERENCE_FIELDS,
    CLOUD_FIELDS,
    CLOUD_KINDS,
    cloud_problems,
    default_base_url,
)
from routing.config.provider_egress import EGRESS_FIELDS, egress_problems
from routing.config.provider_keys import look_up
from routing.core.probes import mode_problem
from routing.core.table import PROVIDER_KINDS, ProviderSpec, Secret
from routing.providers.anthropic.adapter import beta_names_problem
from routing.providers.openai.presets import PRESETS

SECTION = "providers"
_FIELDS = ("name", "kind", "base_url", "api_key", "api_keys", "api_version", "timeout_seconds", "enabled", "probe",
           "allowed_betas", *EGRESS_FIELDS, *CLOUD_FIELDS)

log = logging.getLogger("gomodel.runtime")


def parse_providers(chk: _Checker, data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The section's providers in canonical form; problems are added by path."""
    providers = [_parse_provider(chk, path, entry) for path, entry in _entries(chk, data, SECTION)]
    _check_duplicates(chk, SECTION, [p["name"] for p in providers], "name")
    return providers


def provider_kinds(providers: list[dict[str, Any]]) -> dict[str, str]:
    """Name -> kind of every provider once the file is applied: those configured, then the file's."""
    kinds: dict[str, str] = dict(m.Provider.objects.values_list("name", "kind"))
    # Only names that are strings take part in the cross-checks: any other value is reported already.
    kinds.update({p["name"]: p["kind"] for p in providers if isinstance(p["name"], str)})
    return kinds


def _parse_provider(chk: _Checker, path: str, entry: dict[str, Any]) -> dict[str, Any]:
    """One ``providers`` entry; its key references must name variables that may hold a key, and are set."""
    _check_unknown_keys(chk, path, entry, _FIELDS)
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
    keys = _parse_keys(chk, path, entry)
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


def _parse_keys(chk: _Checker, path: str, entry: dict[str, Any]) -> list[str]:
    """The entry's ``api_key`` or ``api_keys``: references to variables that may hold a key, and are set."""
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
    return keys


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


def apply_providers(canonical: Mapping[str, Any], before: Mapping[str, Any]) -> None:
    """Create or update the file's providers and their keys (unchanged ones are skipped)."""
    for entry in canonical.get(SECTION, []):
        if entry in before.get(SECTION, []):
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


def prune_providers(canonical: Mapping[str, Any]) -> None:
    m.Provider.objects.exclude(name__in=[p["name"] for p in canonical.get(SECTION, [])]).delete()


def provider_entries() -> list[dict[str, Any]]:
    """The configured providers in canonical form, in the order they were created."""
    return [_provider_entry(p) for p in m.Provider.objects.prefetch_related("keys").order_by("id")]


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


def compile_providers() -> list[ProviderSpec]:
    """The enabled providers as the request path sees them, each key read from its variable."""
    return [_compile_provider(row) for row in m.Provider.objects.prefetch_related("keys").filter(enabled=True)]


def _compile_provider(provider: m.Provider) -> ProviderSpec:
    keys: list[Secret] = []
    problems: list[str] = []
    # Every stored reference is checked against today's rules before its variable is read: a row written
    # before a rule existed, or past the admin, must not send a reserved variable's value anywhere.
    for key in provider.keys.all():
        found = look_up(key.reference)
        if found.value is not None:
            keys.append(Secret(found.value))
        else:
            shown = key.reference if m.env_reference_name(key.reference) else "(not a reference)"
            problems.append(f"key {shown}: {found.problem}")
    aws_keys: list[Secret] = []
    for name in AWS_REFERENCE_FIELDS:
        reference = getattr(provider, name)
        if not reference:
            continue
        found = look_up(reference)
        if found.value is not None:
            aws_keys.append(Secret(found.value))
        else:
            shown = reference if m.env_reference_name(reference) else "(not a reference)"
            problems.append(f"{name} {shown}: {found.problem}")
    if problems:
        log.warning("provider %s: %s%s", provider.name, "; ".join(problems),
                    "" if keys or aws_keys else "; no usable key, so its attempts fail without being sent")
    return ProviderSpec(
        name=provider.name,
        kind=provider.kind,
        base_url=provider.base_url.rstrip("/"),
        api_keys=tuple(keys),
        key_problems=tuple(problems),
        api_version=provider.api_version,
        timeout_s=float(provider.timeout_seconds),
        proxy=provider.proxy,
        ca_bundle=provider.ca_bundle,
        client_cert=provider.client_cert,
        client_key=provider.client_key,
        probe=provider.probe,
        region=provider.region,
        project=provider.project,
        credentials_file=provider.credentials_file,
        aws_keys=tuple(aws_keys) if len(aws_keys) >= 2 else (),
        allowed_betas=frozenset(provider.allowed_betas or ()),
    )
