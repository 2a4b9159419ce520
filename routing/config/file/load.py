"""Loading a configuration file: read it, check it whole, apply it (``manage.py loadconfig``, GOMODEL_CONFIG)."""

from __future__ import annotations

from routing.config.file.apply import ApplyResult, apply_config
from routing.config.file.parse import parse_config, read_config_file


def load_config_file(path: str, *, author: str, prune: bool = False) -> ApplyResult:
    """Read, check and apply ``path``; ConfigError naming every problem, and nothing applied then."""
    data = read_config_file(path)
    canonical = parse_config(data)
    return apply_config(canonical, author=author, prune=prune)
