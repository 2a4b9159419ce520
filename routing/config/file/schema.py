"""The shape of the declarative configuration file, and the error that names every problem by its path."""

from __future__ import annotations

SECTIONS = ("providers", "models", "virtual_models", "tier_routes", "category_routes", "routing_policies", "contracts",
            "teams", "caches", "settings")
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


class ConfigError(Exception):
    """A configuration file that cannot be applied; ``problems`` lists every ``path: message``."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems
