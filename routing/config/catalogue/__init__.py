"""The price catalogue: public list prices, limits and capabilities of common models (prices.yaml beside this file).

An entry is a fact read from a provider's page on a known day, keyed by provider kind and upstream model name. The
admin fills a new model's empty fields from it, the config file takes ``prices: catalogue``, and a model whose prices
were set before the catalogue's entry was read, and differ from it, is flagged as older than the catalogue.

The file is read and checked once, on first use; a bad entry stops that use with every problem named, and the test
suite checks the bundled file, so a release never ships one.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from routing.core.names import nearest_names
from routing.core.table import CAPABILITIES, PROVIDER_KINDS

CATALOGUE_FILE = Path(__file__).with_name("prices.yaml")
PRICE_FIELDS = ("input_price", "output_price", "cached_input_price")
LIMIT_FIELDS = ("context_window", "max_output_tokens")
# What an entry fills on a model: the prices, the limits and the capabilities.
FILLED_FIELDS = (*PRICE_FIELDS, *LIMIT_FIELDS, "capabilities")
_REQUIRED = ("kind", "upstream", "input_price", "output_price", "context_window", "capabilities", "as_of", "source")
_OPTIONAL = ("cached_input_price", "max_output_tokens", "note", "aliases")


class CatalogueError(Exception):
    """A catalogue file that cannot be used; ``problems`` lists every ``entries[i].field: message``."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class CatalogueEntry:
    """One model's public figures on one provider kind, as read from ``source`` on ``as_of``."""

    kind: str
    upstream: str
    input_price: Decimal
    output_price: Decimal
    context_window: int
    capabilities: tuple[str, ...]
    as_of: dt.date
    source: str
    cached_input_price: Decimal | None = None
    max_output_tokens: int | None = None
    note: str = ""
    # Other names the provider answers to for this very model (Anthropic's undated aliases), never a snapshot
    # that is priced differently.
    aliases: tuple[str, ...] = ()

    def fields(self) -> dict[str, Any]:
        """The model fields this entry fills (prices as Decimal; absent figures as None)."""
        return {"input_price": self.input_price, "output_price": self.output_price,
                "cached_input_price": self.cached_input_price, "context_window": self.context_window,
                "max_output_tokens": self.max_output_tokens, "capabilities": list(self.capabilities)}

    def same_prices(self, prices: Mapping[str, Any]) -> bool:
        """Whether ``prices`` (input, output and cached input, numbers or None) are this entry's."""
        return all(_decimal_or_none(prices.get(name)) == getattr(self, name) for name in PRICE_FIELDS)


@dataclass(frozen=True)
class Catalogue:
    """The entries by ``(kind, upstream)``, each also under its aliases."""

    entries: Mapping[tuple[str, str], CatalogueEntry]

    def lookup(self, kind: str, upstream: str) -> CatalogueEntry | None:
        return self.entries.get((kind, upstream.strip()))

    def names(self, kind: str) -> list[str]:
        """The upstream names catalogued for ``kind``, sorted."""
        return sorted(upstream for entry_kind, upstream in self.entries if entry_kind == kind)

    def close_names(self, kind: str, upstream: str) -> list[str]:
        """The catalogued names of ``kind`` nearest to ``upstream`` (none when nothing is close)."""
        return nearest_names(upstream, self.names(kind))

    def is_stale(self, kind: str, upstream: str, prices: Mapping[str, Any], prices_as_of: dt.date | None) -> bool:
        """Whether a model's prices are older than the catalogue's entry and differ from it.

        A price of unknown date counts as older. Prices equal to the entry's are current whatever their date, so
        a model filled from an earlier catalogue whose figures did not change is not flagged; a model without
        prices has none to be older.
        """
        entry = self.lookup(kind, upstream)
        if entry is None or entry.same_prices(prices) or all(prices.get(name) is None for name in PRICE_FIELDS):
            return False
        return prices_as_of is None or prices_as_of < entry.as_of


def _decimal_or_none(value: Any) -> Decimal | None:
    if value is None:
        return None
    return value if isinstance(value, Decimal) else Decimal(str(value))


def _number_problem(value: Any, *, integer: bool) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"expected a number, got {value!r}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"expected a finite number, got {value!r}"
    if integer and not isinstance(value, int):
        return f"expected a whole number, got {value!r}"
    if value < 0 or (integer and value < 1):
        return f"expected a number of at least {1 if integer else 0}, got {value!r}"
    return None


def _entry_problems(raw: Any, today: dt.date) -> list[tuple[str, str]]:
    """What is wrong with one raw entry, each as ``(field, message)``; the field is "" for the entry as a whole."""
    if not isinstance(raw, dict):
        return [("", "expected a mapping")]
    problems = [(str(key), "unknown field") for key in raw if key not in (*_REQUIRED, *_OPTIONAL)]
    problems += [(key, "missing") for key in _REQUIRED if raw.get(key) is None]
    if raw.get("kind") is not None and raw["kind"] not in PROVIDER_KINDS:
        problems.append(("kind", f"unknown provider kind {raw['kind']!r}"))
    if raw.get("upstream") is not None and (not isinstance(raw["upstream"], str) or not raw["upstream"].strip()):
        problems.append(("upstream", "expected the provider's model name"))
    for key in (*PRICE_FIELDS, *LIMIT_FIELDS):
        if raw.get(key) is not None and (problem := _number_problem(raw[key], integer=key in LIMIT_FIELDS)):
            problems.append((key, problem))
    caps = raw.get("capabilities")
    if caps is not None and (not isinstance(caps, list) or "text" not in caps
                             or any(c not in CAPABILITIES for c in caps) or len(set(caps)) != len(caps)):
        problems.append(("capabilities", f"expected a list of distinct {', '.join(CAPABILITIES)} with text, "
                                         f"got {caps!r}"))
    as_of = raw.get("as_of")
    if as_of is not None and (not isinstance(as_of, dt.date) or isinstance(as_of, dt.datetime)):
        problems.append(("as_of", f"expected a date such as 2026-12-02, got {as_of!r}"))
    elif as_of is not None and as_of > today:
        problems.append(("as_of", f"{as_of} is in the future"))
    source = raw.get("source")
    if source is not None and (not isinstance(source, str) or not source.startswith("https://")):
        problems.append(("source", f"expected the https:// address of the page read, got {source!r}"))
    if raw.get("note") is not None and not isinstance(raw["note"], str):
        problems.append(("note", "expected a string"))
    aliases = raw.get("aliases")
    if aliases is not None and (not isinstance(aliases, list) or not all(
            isinstance(a, str) and a.strip() and a != raw.get("upstream") for a in aliases)):
        problems.append(("aliases", f"expected a list of the provider's other names for this model, got {aliases!r}"))
    if not problems and raw.get("cached_input_price") is not None and raw["cached_input_price"] > raw["input_price"]:
        problems.append(("cached_input_price", "a cache hit costing more than the input price"))
    return problems


def _entry(raw: Mapping[str, Any]) -> CatalogueEntry:
    return CatalogueEntry(
        kind=raw["kind"], upstream=raw["upstream"].strip(),
        input_price=Decimal(str(raw["input_price"])), output_price=Decimal(str(raw["output_price"])),
        cached_input_price=_decimal_or_none(raw.get("cached_input_price")),
        context_window=raw["context_window"], max_output_tokens=raw.get("max_output_tokens"),
        capabilities=tuple(raw["capabilities"]), as_of=raw["as_of"], source=raw["source"],
        note=raw.get("note") or "", aliases=tuple(a.strip() for a in raw.get("aliases") or ()),
    )


def parse_catalogue(data: Any, *, today: dt.date) -> Catalogue:
    """The catalogue in ``data`` (the YAML's contents); CatalogueError naming every bad entry by its index."""
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list) or set(data) != {"entries"}:
        raise CatalogueError(["the file must be a mapping with one key, entries: a list of entries"])
    problems: list[str] = []
    entries: dict[tuple[str, str], CatalogueEntry] = {}
    raw_entries: Sequence[Any] = data["entries"]
    for i, raw in enumerate(raw_entries):
        found = _entry_problems(raw, today)
        if found:
            problems += [f"entries[{i}]{'.' + name if name else ''}: {message}" for name, message in found]
            continue
        entry = _entry(raw)
        for name in (entry.upstream, *entry.aliases):
            if (entry.kind, name) in entries:
                problems.append(f"entries[{i}]: {entry.kind} {name} is listed twice")
            entries[(entry.kind, name)] = entry
    if problems:
        raise CatalogueError(problems)
    return Catalogue(entries=entries)


@functools.cache
def catalogue() -> Catalogue:
    """The bundled catalogue, read and checked on first use."""
    with CATALOGUE_FILE.open(encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    return parse_catalogue(data, today=dt.date.today())
