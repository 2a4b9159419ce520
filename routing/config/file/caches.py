"""The ``caches`` section: the requested names whose answers the response cache keeps (docs/cache.md).

```yaml
caches:
  - {model: normal, ttl: 10m, scope: team}
  - {model: openai/gpt-4o-mini, ttl: 1h}
```

``model`` is a name clients call (a model, a virtual model, a tier or category alias) of the file or already
configured; ``ttl`` a Go duration (``30s``, ``10m``, ``1h30m``) or a number of seconds, from 1 second to 30 days;
``scope`` ``key`` (the default), ``team`` or ``global``; ``enabled`` defaults to true; ``semantic: {embeddings:
NAME, threshold: 0.95}`` also serves paraphrases: ``embeddings`` names a model of this gateway that serves
embeddings (or a virtual model of such models), ``threshold`` the cosine similarity needed, 0.5 to 1 (default 0.95).
The canonical form writes ``ttl`` as the shortest Go duration of its whole seconds and leaves the defaults out.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from django.conf import settings

from routing import models as m
from routing.config.file.checks import _check_bool, _check_duplicates, _check_unknown_keys, _Checker
from routing.core.cache import SCOPES, CacheSpec, SemanticSpec
from routing.core.durations import parse_duration

SECTION = "caches"
_FIELDS = ("model", "ttl", "scope", "enabled", "semantic")
MAX_TTL_S = 30 * 24 * 3600
DEFAULT_THRESHOLD = 0.95


def parse_caches(chk: _Checker, data: Mapping[str, Any], *, callable_names: Collection[str],
                 embedding_names: Collection[str] = ()) -> list[dict[str, Any]]:
    """The section's entries in canonical form; problems are added by path. ``callable_names`` are the names of
    the file, ``embedding_names`` those of them that serve embeddings; the configured ones are added here."""
    raw = data.get(SECTION)
    if raw is None:
        return []
    if not isinstance(raw, list):
        chk.add(SECTION, "expected a list of {model, ttl, scope}")
        return []
    known = set(callable_names) | _configured_names()
    embedders = set(embedding_names) | configured_embedders()
    out: list[dict[str, Any]] = []
    for i, entry in enumerate(raw):
        path = f"{SECTION}[{i}]"
        if not isinstance(entry, dict):
            chk.add(path, "expected a mapping with model, ttl and scope")
            continue
        _check_unknown_keys(chk, path, entry, _FIELDS)
        name = entry.get("model")
        if not isinstance(name, str) or not name.strip():
            chk.add(f"{path}.model", f"expected the name of a model, virtual model or alias, got {name!r}")
        elif name not in known:
            chk.add(f"{path}.model", f'unknown name "{name}" (expected a model, virtual model, tier or category alias)')
        seconds = ttl_seconds(entry.get("ttl"))
        if seconds is None:
            chk.add(f"{path}.ttl", f"expected a duration from 1s to 720h (10m, 1h30m) or whole seconds, got "
                                   f"{entry.get('ttl')!r}")
        scope = entry.get("scope", "key")
        if scope not in SCOPES:
            chk.add(f"{path}.scope", f"expected one of {', '.join(SCOPES)}, got {scope!r}")
        _check_bool(chk, f"{path}.enabled", entry.get("enabled", True))
        cache: dict[str, Any] = {"model": name, "ttl": format_ttl(seconds or 0)}
        if scope != "key":
            cache["scope"] = scope
        if entry.get("enabled", True) is False:
            cache["enabled"] = False
        if entry.get("semantic") is not None:
            semantic = _parse_semantic(chk, f"{path}.semantic", entry["semantic"], embedders)
            if semantic is not None:
                cache["semantic"] = semantic
        out.append(cache)
    _check_duplicates(chk, SECTION, [c["model"] for c in out], "model")
    return out


def _parse_semantic(chk: _Checker, path: str, value: Any, embedders: set[str]) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        chk.add(path, "expected {embeddings: MODEL, threshold: 0.95}")
        return None
    _check_unknown_keys(chk, path, value, ("embeddings", "threshold"))
    name = value.get("embeddings")
    if not isinstance(name, str) or name not in embedders:
        chk.add(f"{path}.embeddings", f"expected a model of this gateway that serves embeddings (endpoints: "
                                      f"[embeddings]) or a virtual model of them, got {name!r}")
    threshold = value.get("threshold", DEFAULT_THRESHOLD)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0.5 <= threshold <= 1:
        chk.add(f"{path}.threshold", f"expected a cosine similarity from 0.5 to 1, got {threshold!r}")
        threshold = DEFAULT_THRESHOLD
    semantic: dict[str, Any] = {"embeddings": name}
    if threshold != DEFAULT_THRESHOLD:
        semantic["threshold"] = float(threshold)
    return semantic


def configured_embedders() -> set[str]:
    """The configured names that serve embeddings: models with the endpoint, and virtual models all of whose
    targets do (nested ones included)."""
    names = {row.name for row in m.ProviderModel.objects.all() if "embeddings" in (row.endpoints or [])}
    virtual = {vm.source: [t.target for t in vm.targets.all()]
               for vm in m.VirtualModel.objects.prefetch_related("targets")}
    return names | embedding_virtuals(names, virtual)


def embedding_virtuals(embedders: set[str], virtual: Mapping[str, list[str]]) -> set[str]:
    """The virtual models of ``virtual`` (source -> targets) whose every target serves embeddings."""
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for source, targets in virtual.items():
            if source not in found and targets and all(t in embedders or t in found for t in targets):
                found.add(source)
                changed = True
    return found


def ttl_seconds(value: Any) -> int | None:
    """Whole seconds of a ``ttl`` (a Go duration or a number), or None when it is not one within bounds."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds: float | None = float(value)
    elif isinstance(value, str):
        seconds = parse_duration(value)
    else:
        return None
    if seconds is None or not 1 <= seconds <= MAX_TTL_S or seconds != int(seconds):
        return None
    return int(seconds)


def format_ttl(seconds: int) -> str:
    """``seconds`` as the shortest Go duration: 600 -> ``10m``, 5400 -> ``1h30m``, 45 -> ``45s``."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{secs}s" if secs else "")
    return text or "0s"


def _configured_names() -> set[str]:
    return {*m.ProviderModel.objects.values_list("name", flat=True),
            *m.VirtualModel.objects.values_list("source", flat=True),
            *m.TierRoute.objects.values_list("alias", flat=True),
            *m.CategoryRoute.objects.values_list("alias", flat=True),
            *settings.PRO_SMART_ROUTING_ROUTES}


def apply_caches(canonical: Mapping[str, Any], before: Mapping[str, Any], *, prune: bool) -> None:
    """Upsert the file's caches (a purge's generation is kept); with ``prune`` delete the others."""
    wanted: list[dict[str, Any]] = canonical.get(SECTION, [])
    had = before.get(SECTION, [])
    for entry in wanted:
        if entry in had:
            continue
        seconds = ttl_seconds(entry["ttl"]) or 1  # checked when parsed
        semantic = entry.get("semantic") or {}
        m.ResponseCache.objects.update_or_create(model=entry["model"], defaults={
            "ttl_seconds": seconds, "scope": entry.get("scope", "key"), "enabled": entry.get("enabled", True),
            "semantic_embeddings": semantic.get("embeddings", ""),
            "semantic_threshold": semantic.get("threshold", DEFAULT_THRESHOLD)})
    if prune:
        m.ResponseCache.objects.exclude(model__in=[entry["model"] for entry in wanted]).delete()


def cache_entries() -> list[dict[str, Any]]:
    """Every configured cache in canonical form, in the order they were created."""
    out = []
    for row in m.ResponseCache.objects.order_by("id"):
        entry: dict[str, Any] = {"model": row.model, "ttl": format_ttl(row.ttl_seconds)}
        if row.scope != "key":
            entry["scope"] = row.scope
        if not row.enabled:
            entry["enabled"] = False
        if row.semantic_embeddings:
            entry["semantic"] = {"embeddings": row.semantic_embeddings}
            if row.semantic_threshold != DEFAULT_THRESHOLD:
                entry["semantic"]["threshold"] = row.semantic_threshold
        out.append(entry)
    return out


def purge_generations() -> dict[str, int]:
    """Each cache's purge count (only those purged): recorded with the configuration's revisions, so a purge is a
    new version that every process follows (routing.config.cache_purge)."""
    return dict(m.ResponseCache.objects.filter(generation__gt=0).order_by("id").values_list("model", "generation"))


def compile_caches() -> list[CacheSpec]:
    return [CacheSpec(name=row.model, ttl_s=float(row.ttl_seconds), scope=row.scope,  # type: ignore[arg-type]
                      generation=row.generation, enabled=row.enabled,
                      semantic=SemanticSpec(row.semantic_embeddings, float(row.semantic_threshold))
                      if row.semantic_embeddings else None)
            for row in m.ResponseCache.objects.all()]
