"""A ``models`` entry's ``prices: catalogue`` and ``prices_as_of`` (docs: README "Price catalogue").

``prices: catalogue`` fills the entry's prices, limits and capabilities from the bundled price catalogue
(routing.config.catalogue) and dates them with the catalogue's ``as_of``; limits and capabilities given in the entry
win, prices may not be given beside it. The canonical form holds the filled figures, so a dump shows what is in force
and a new catalogue's figures arrive as a change the next time the file is loaded.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from routing.config.catalogue import PRICE_FIELDS, catalogue
from routing.config.file.checks import _Checker
from routing.core.names import did_you_mean
from routing.core.table import PROVIDER_KINDS

CATALOGUE = "catalogue"


def catalogue_fill(chk: _Checker, path: str, entry: dict[str, Any], kind: str | None) -> dict[str, Any]:
    """The fields ``prices: catalogue`` fills on ``entry`` (none without it); problems are added to ``chk``."""
    if entry.get("prices") is None:
        return {}
    if entry["prices"] != CATALOGUE:
        chk.add(f"{path}.prices", f"expected {CATALOGUE} (the only value), got {entry['prices']!r}")
        return {}
    given = [name for name in (*PRICE_FIELDS, "prices_as_of") if entry.get(name) is not None]
    if given:
        chk.add(f"{path}.prices", f"prices: {CATALOGUE} sets {', '.join(given)}: give one or the other")
        return {}
    upstream = entry.get("upstream")
    if kind is None or kind not in PROVIDER_KINDS or not isinstance(upstream, str) or not upstream.strip():
        return {}  # the unknown provider or the missing upstream is reported by the entry's own checks
    found = catalogue().lookup(kind, upstream)
    if found is None:
        chk.add(f"{path}.prices", _not_catalogued(kind, upstream.strip()))
        return {}
    filled: dict[str, Any] = {name: float(value) if name in PRICE_FIELDS else value
                              for name, value in found.fields().items()
                              if value is not None and entry.get(name) is None}
    filled["prices_as_of"] = found.as_of.isoformat()
    return filled


def _not_catalogued(kind: str, upstream: str) -> str:
    names = catalogue().names(kind)
    message = f'"{upstream}" is not in the price catalogue for {kind} providers'
    if not names:
        return f"{message} (it lists no {kind} model); give the prices instead"
    hint = did_you_mean(upstream, names)
    if hint:
        return f"{message}.{hint}"
    return f"{message}; it lists {', '.join(names)}. Give the prices instead for any other model"


def parse_prices_as_of(chk: _Checker, path: str, value: Any) -> str | None:
    """``prices_as_of`` as an ISO date string (YAML reads an unquoted date as a date), or None when absent."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        value = value.date()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value.strip()).isoformat()
        except ValueError:
            pass
    chk.add(f"{path}.prices_as_of", f"expected a date such as 2026-12-02, got {value!r}")
    return None
