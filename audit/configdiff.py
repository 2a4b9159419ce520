"""Readable diffs between two routing configuration snapshots, and scrubbing secrets out of snapshots.

A snapshot is the declarative config dict (providers, models, virtual_models, tier_routes, contracts,
settings). Lists of entries are matched by their identity (a provider's ``name``, a virtual model's
``source``, a contract's ``workload``...), not by position, so inserting one model shows as one added
line rather than every later model changing. Each diff line is one of::

    + models[openai/gpt-5]: {"provider": "openai", ...}
    - providers[legacy]: {...}
    ~ models[openai/gpt-4o-mini].input_price: 0.15 -> 0.2
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from audit.delivery.redact import mask_secrets

REDACTED = "[redacted]"
_SECRET_KEY = re.compile(r"(?i)(^|_)(api_?key|keys?|secret|token|password|passwd|authorization|credentials?)$")
_ENV_REFERENCE = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")
_IDENTITY_FIELDS = ("name", "source", "workload", "alias", "model", "upstream")


def _scrub_secret_value(value: Any) -> Any:
    if isinstance(value, str):
        return value if _ENV_REFERENCE.match(value) or value == "" else REDACTED
    if isinstance(value, list):
        return [_scrub_secret_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _scrub_secret_value(v) for k, v in value.items()}
    return value


def scrub_snapshot(value: Any) -> Any:
    """A copy of ``value`` where secret-named fields keep only ``${VAR}`` references and strings are masked."""
    if isinstance(value, dict):
        return {
            str(k): _scrub_secret_value(v) if _SECRET_KEY.search(str(k)) else scrub_snapshot(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [scrub_snapshot(v) for v in value]
    if isinstance(value, str):
        return mask_secrets(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    return mask_secrets(str(value))


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(", ", ": "), default=str)


def _identity(entry: dict[str, Any]) -> str | None:
    if "provider" in entry and "upstream" in entry and "name" not in entry:
        return f"{entry['provider']}/{entry['upstream']}"
    for field in _IDENTITY_FIELDS:
        if isinstance(entry.get(field), str | int):
            return str(entry[field])
    return None


def _keyed(items: list[Any]) -> dict[str, Any] | None:
    """The list as {identity: entry}, or None when its entries have no unique identity."""
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    keys = [_identity(i) for i in items]
    if any(k is None for k in keys) or len(set(keys)) != len(keys):
        return None
    return {str(k): i for k, i in zip(keys, items, strict=True)}


def _diff(old: Any, new: Any, path: str, out: list[str]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new), key=str):
            child = f"{path}.{key}" if path else str(key)
            if key not in old and isinstance(new[key], list) and _keyed(new[key]) is not None:
                _diff([], new[key], child, out)  # a section's first entries, one line each
            elif key not in new and isinstance(old[key], list) and _keyed(old[key]) is not None:
                _diff(old[key], [], child, out)
            elif key not in old:
                out.append(f"+ {child}: {_compact(new[key])}")
            elif key not in new:
                out.append(f"- {child}: {_compact(old[key])}")
            else:
                _diff(old[key], new[key], child, out)
        return
    if isinstance(old, list) and isinstance(new, list):
        old_keyed, new_keyed = _keyed(old), _keyed(new)
        if (old_keyed is not None or not old) and (new_keyed is not None or not new) and (old or new):
            old_keyed, new_keyed = old_keyed or {}, new_keyed or {}
            for key in sorted(set(old_keyed) | set(new_keyed)):
                child = f"{path}[{key}]"
                if key not in old_keyed:
                    out.append(f"+ {child}: {_compact(new_keyed[key])}")
                elif key not in new_keyed:
                    out.append(f"- {child}: {_compact(old_keyed[key])}")
                else:
                    _diff(old_keyed[key], new_keyed[key], child, out)
            return
    if old != new:
        out.append(f"~ {path}: {_compact(old)} -> {_compact(new)}")


def _summary(lines: list[str]) -> str:
    verbs = {"+": "added", "-": "removed", "~": "changed"}
    counts: Counter[tuple[str, str]] = Counter()
    for line in lines:
        section = re.split(r"[.\[]", line[2:].split(":", 1)[0], maxsplit=1)[0]
        counts[(section, verbs[line[0]])] += 1
    sections: dict[str, list[str]] = {}
    for (section, verb), count in sorted(counts.items()):
        sections.setdefault(section, []).append(f"{count} {verb}")
    return "; ".join(f"{section}: {', '.join(parts)}" for section, parts in sections.items())


def diff_snapshots(old: dict[str, Any] | None, new: dict[str, Any]) -> tuple[str, str]:
    """The readable diff from ``old`` to ``new`` and a one-line summary; ``old`` None means first revision."""
    if old is None:
        counts = ", ".join(
            f"{len(v)} {k}" if isinstance(v, list | dict) else k for k, v in sorted(new.items())
        )
        lines: list[str] = []
        empty = {k: [] if isinstance(v, list) else {} if isinstance(v, dict) else None for k, v in new.items()}
        _diff(empty, new, "", lines)
        return "\n".join(lines), f"initial configuration: {counts or 'empty'}"
    lines = []
    _diff(old, new, "", lines)
    return "\n".join(lines), _summary(lines) or "no change"
