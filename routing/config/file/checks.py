"""Field checks shared by the parsers: each adds ``path: message`` problems instead of raising at the first."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from routing import models as m


@dataclass
class _Checker:
    problems: list[str] = field(default_factory=list)

    def add(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")


def _num(value: Any) -> float | None:
    """A number as a float; None when absent or not a number (``_check_number`` reports that by its path)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


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


def _check_duplicates(chk: _Checker, section: str, names: list[Any], key: str) -> None:
    for i, name in enumerate(names):
        if name in names[:i]:
            chk.add(f"{section}[{i}].{key}", f'"{name}" appears twice')


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
