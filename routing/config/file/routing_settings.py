"""The ``settings`` section: parse and check it, apply it, dump it back, compile the values in force.

``settings`` overrides the PRO_SMART_ROUTING_* and PRO_ROUTING_* environment values (the one RoutingSettings row
the admin edits too); a setting left out keeps the environment's value, and with ``prune`` a setting the file
leaves out goes back to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from django.conf import settings
from django.core.exceptions import ValidationError

from routing import models as m
from routing.config.file.checks import _Checker
from routing.core.categories import DEFAULT_LONG_CONTEXT_TOKENS, KEYWORD_CATEGORIES
from routing.core.table import SettingsInForce

SECTION = "settings"
SETTINGS_FIELDS = {
    "smart_routing_enabled": bool,
    "smart_routing_threshold": int,
    "smart_routing_session_ttl_seconds": int,
    "smart_routing_keywords": list,
    "category_keywords": dict,
    "category_long_context_tokens": int,
    "routing_enabled": bool,
    "routing_objective": str,
    "min_weight_fraction": float,
    "cooldown_base_seconds": float,
    "cooldown_max_seconds": float,
    "warm_cache_weight": float,
    "warm_cache_ttl_seconds": float,
    "exploration": float,
    "cold_start_observations": int,
    "probe_interval_seconds": float,
}

_T = TypeVar("_T")


def parse_routing_settings(chk: _Checker, data: Mapping[str, Any]) -> dict[str, Any]:
    """The ``settings`` section, checked by the RoutingSettings model's own validation."""
    settings_out: dict[str, Any] = {}
    raw_settings = data.get(SECTION) or {}
    if not isinstance(raw_settings, dict):
        chk.add(SECTION, "expected a mapping")
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
            chk.add(SECTION, str(exc))
    return settings_out


def apply_routing_settings(canonical: Mapping[str, Any], before: Mapping[str, Any], *, prune: bool) -> None:
    """Write the file's settings; with ``prune`` the settings it leaves out go back to the environment's."""
    if SECTION not in canonical and not prune:
        return
    wanted = canonical.get(SECTION, {})
    if wanted == before.get(SECTION, {}):
        return
    row = m.RoutingSettings.load()
    for key in SETTINGS_FIELDS:
        if key in wanted:
            setattr(row, key, wanted[key])
        elif prune:
            setattr(row, key, "" if key == "routing_objective" else None)
    row.save()


def routing_settings_entries() -> dict[str, Any]:
    """The settings set in the database, in canonical form."""
    row = m.RoutingSettings.objects.filter(pk=1).first()
    if row is None:
        return {}
    out: dict[str, Any] = {}
    for key in SETTINGS_FIELDS:
        value = getattr(row, key)
        if value is not None and value != "":
            out[key] = value
    return out


def compile_routing_settings() -> SettingsInForce:
    return compile_settings(m.RoutingSettings.objects.filter(pk=1).first())


def compile_settings(row: m.RoutingSettings | None) -> SettingsInForce:
    """Environment values as defaults, admin overrides on top."""

    # An unsaved row holds every field empty (None, or "" for the objective): all environment values.
    row = row if row is not None else m.RoutingSettings()

    def pick(value: _T | None, default: _T) -> _T:
        return default if value is None or value == "" else value

    return SettingsInForce(
        smart_routing_enabled=bool(pick(row.smart_routing_enabled, settings.PRO_SMART_ROUTING_ENABLED)),
        smart_routing_threshold=int(pick(row.smart_routing_threshold, settings.PRO_SMART_ROUTING_THRESHOLD)),
        smart_routing_session_ttl_s=float(
            pick(row.smart_routing_session_ttl_seconds, settings.PRO_SMART_ROUTING_SESSION_TTL)
        ),
        smart_routing_keywords=tuple(pick(row.smart_routing_keywords, settings.PRO_SMART_ROUTING_KEYWORDS)),
        category_keywords=compile_category_keywords(row.category_keywords),
        category_long_context_tokens=int(pick(row.category_long_context_tokens, DEFAULT_LONG_CONTEXT_TOKENS)),
        routing_enabled=bool(pick(row.routing_enabled, settings.PRO_ROUTING_ENABLED)),
        routing_objective=str(pick(row.routing_objective, settings.PRO_ROUTING_OBJECTIVE)),
        min_weight_fraction=float(pick(row.min_weight_fraction, settings.PRO_ROUTING_MIN_WEIGHT_FRACTION)),
        cooldown_base_s=float(pick(row.cooldown_base_seconds, settings.PRO_ROUTING_COOLDOWN_BASE)),
        cooldown_max_s=float(pick(row.cooldown_max_seconds, settings.PRO_ROUTING_COOLDOWN_MAX)),
        warm_cache_weight=float(pick(row.warm_cache_weight, settings.PRO_ROUTING_WARM_CACHE_WEIGHT)),
        warm_cache_ttl_s=float(pick(row.warm_cache_ttl_seconds, settings.PRO_ROUTING_WARM_CACHE_TTL)),
        exploration=float(pick(row.exploration, settings.PRO_ROUTING_EXPLORATION)),
        cold_start_observations=int(pick(row.cold_start_observations, settings.PRO_ROUTING_COLD_START_OBSERVATIONS)),
        probe_interval_s=float(pick(row.probe_interval_seconds, settings.PRO_ROUTING_PROBE_INTERVAL)),
    )


def compile_category_keywords(value: object) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The admin's per-category keyword lists as the classifier's hashable overrides, in precedence order."""
    if not isinstance(value, dict):
        return ()
    return tuple((category, tuple(str(k) for k in value[category]))
                 for category in KEYWORD_CATEGORIES if isinstance(value.get(category), list) and value[category])
