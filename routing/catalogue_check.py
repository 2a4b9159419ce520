"""``manage.py check --database default`` warns of each model whose prices are older than the price catalogue's.

A database check (Django runs those only when told which database to read), so the plain ``check`` of a build step
needs no database. The same comparison as the model list's flag (routing.admin_catalogue).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.checks import CheckMessage, Tags, register
from django.core.checks import Warning as CheckWarning
from django.db import DatabaseError

from audit.money import usd
from routing.config.catalogue import PRICE_FIELDS, catalogue

STALE_PRICES = "routing.W001"


@register(Tags.database)
def stale_prices(app_configs: Sequence[Any] | None, databases: Sequence[str] | None = None,
                 **kwargs: Any) -> list[CheckMessage]:
    if not databases:
        return []
    from routing import models as m

    try:
        rows = list(m.ProviderModel.objects.select_related("provider"))
    except DatabaseError:  # not migrated yet (this check also runs before migrate applies anything)
        return []
    found: list[CheckMessage] = []
    for row in rows:
        prices = {name: getattr(row, name) for name in PRICE_FIELDS}
        if not catalogue().is_stale(row.provider.kind, row.upstream, prices, row.prices_as_of):
            continue
        entry = catalogue().lookup(row.provider.kind, row.upstream)
        if entry is None:
            continue
        dated = row.prices_as_of.isoformat() if row.prices_as_of else "an unknown day"
        found.append(CheckWarning(
            f"The prices of {row.name} (set {dated}) are older than the price catalogue's, read {entry.as_of} from "
            f"{entry.source}: {usd(float(entry.input_price))} in / {usd(float(entry.output_price))} out per 1M "
            f"tokens.",
            hint="Update them in the admin (empty prices take the catalogue's on save), or give the model "
                 "prices: catalogue in the config file.",
            obj=row, id=STALE_PRICES))
    return found
