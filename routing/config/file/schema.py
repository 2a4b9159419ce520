"""The sections of the declarative configuration file, and the error that names every problem by its path."""

from __future__ import annotations

# In the file's canonical order; each has its module in this package (the settings' fields are in
# routing_settings.SETTINGS_FIELDS).
SECTIONS = ("providers", "models", "virtual_models", "tier_routes", "category_routes", "routing_policies", "contracts",
            "teams", "caches", "settings")


class ConfigError(Exception):
    """A configuration file that cannot be applied; ``problems`` lists every ``path: message``."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems
