"""The declarative configuration file: parse and check it whole, apply it atomically, dump it back.

The canonical form leaves out values equal to their defaults, so ``dump -> load -> dump`` is equal and
loading the same file twice changes nothing. Errors name the path of the offending entry, e.g.
``virtual_models[2].targets[0].model: unknown model "x"``.

One module per section holds its parse, apply, dump and compile (``providers``, ``provider_models``,
``contracts``, ``virtual_models``, ``tier_routes``, ``category_routes``, ``policies``, ``teams``, ``caches``,
``routing_settings``); ``parse``, ``apply`` and ``dump`` run them in order.
This package re-exports their public names, so ``from routing.config.file import X`` keeps working.
"""

from __future__ import annotations

from routing.config.file.apply import ApplyResult, apply_config
from routing.config.file.dump import dump_config, dump_yaml
from routing.config.file.parse import parse_config, read_config_file
from routing.config.file.routing_settings import SETTINGS_FIELDS
from routing.config.file.schema import SECTIONS, ConfigError

__all__ = [
    "SECTIONS",
    "SETTINGS_FIELDS",
    "ApplyResult",
    "ConfigError",
    "apply_config",
    "dump_config",
    "dump_yaml",
    "load_config_file",
    "parse_config",
    "read_config_file",
]


def load_config_file(path: str, *, author: str, prune: bool = False) -> ApplyResult:
    """Read, check and apply ``path``; ConfigError naming every problem, and nothing applied then."""
    data = read_config_file(path)
    canonical = parse_config(data)
    return apply_config(canonical, author=author, prune=prune)
