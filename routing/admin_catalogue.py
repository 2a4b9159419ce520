"""The price catalogue in the model admin: fill a new model's fields, date its prices, flag prices gone stale.

The fill happens on save, on the server: a model whose provider and upstream name are catalogued and whose three
price fields are left empty takes the catalogue's prices, and its limits and capabilities where those are empty too.
The page's script (routing/static/routing/catalogue_fill.js) does the same in the browser as soon as the name is
typed, so the operator sees the figures before saving; without it the save still fills them.

``prices_as_of`` is not typed: the catalogue's date when the prices are the catalogue's, today when a price is
typed, unknown when there are none.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html, json_script

from audit.money import usd
from routing import models as m
from routing.config.catalogue import LIMIT_FIELDS, PRICE_FIELDS, CatalogueEntry, catalogue


def catalogue_data() -> dict[str, Any]:
    """What the page's script needs: each provider's kind, and the catalogue's entries by kind and name."""
    entries: dict[str, dict[str, Any]] = {}
    for (kind, name), entry in catalogue().entries.items():
        fields = {key: (None if value is None else str(value) if key in PRICE_FIELDS else value)
                  for key, value in entry.fields().items()}
        entries.setdefault(kind, {})[name] = {**fields, "as_of": entry.as_of.isoformat(), "source": entry.source,
                                                 "note": entry.note}
    providers = {str(pk): kind for pk, kind in m.Provider.objects.values_list("pk", "kind")}
    return {"providers": providers, "entries": entries}


class CatalogueUpstreamInput(forms.TextInput):
    """The upstream name, offering the catalogued names of the chosen provider's kind as one types."""

    class Media:
        js = ("routing/catalogue_fill.js",)

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs={"size": 40, "autocomplete": "off", **(attrs or {})})

    def render(self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None) -> str:
        attrs = dict(attrs or {})
        list_id = f"{attrs.get('id') or 'id_' + name}-catalogue"
        attrs["list"] = list_id
        field = super().render(name, value, attrs, renderer)
        data = json_script(catalogue_data(), "catalogue-data")
        return format_html('{}<datalist id="{}" class="catalogue-names"></datalist>{}', field, list_id, data)


def fill_from_catalogue(data: dict[str, Any]) -> CatalogueEntry | None:
    """Fill the form's empty fields in ``data`` from the catalogue; the entry used, or None when nothing was filled.

    Only a model whose three prices are all empty is filled: a typed price is the operator's, and mixing it with
    the catalogue's would give a price list no provider publishes.
    """
    provider, upstream = data.get("provider"), data.get("upstream")
    if provider is None or not upstream or any(data.get(name) is not None for name in PRICE_FIELDS):
        return None
    entry = catalogue().lookup(provider.kind, upstream)
    if entry is None:
        return None
    figures = entry.fields()
    for name in PRICE_FIELDS:
        data[name] = figures[name]
    for name in LIMIT_FIELDS:
        if data.get(name) is None:
            data[name] = figures[name]
    if not data.get("capabilities"):
        data["capabilities"] = figures["capabilities"]
    return entry


def prices_date(data: dict[str, Any], *, filled: bool, changed: list[str],
                current: dt.date | None) -> dt.date | None:
    """The ``prices_as_of`` the saved model gets: unchanged unless its prices were filled or edited."""
    if not filled and not set(changed) & set(PRICE_FIELDS):
        return current
    prices = {name: data.get(name) for name in PRICE_FIELDS}
    if all(value is None for value in prices.values()):
        return None
    provider, upstream = data.get("provider"), data.get("upstream")
    entry = catalogue().lookup(provider.kind, upstream) if provider is not None and upstream else None
    if entry is not None and entry.same_prices(prices):
        return entry.as_of
    return timezone.localdate()


def is_stale(model: m.ProviderModel) -> bool:
    prices = {name: getattr(model, name) for name in PRICE_FIELDS}
    return catalogue().is_stale(model.provider.kind, model.upstream, prices, model.prices_as_of)


def prices_as_of_cell(model: m.ProviderModel) -> str:
    """The list's "prices as of" cell: the date, and a flag with the catalogue's figures when they are newer."""
    shown = model.prices_as_of.isoformat() if model.prices_as_of else "unknown"
    if not is_stale(model):
        return shown
    entry = catalogue().lookup(model.provider.kind, model.upstream)
    if entry is None:  # is_stale says there is one; kept for the type checker
        return shown
    title = f"The price catalogue's figures, read {entry.as_of} from {entry.source}"
    # On three short lines, so the column stays narrow in a list that is already wide.
    return format_html(
        '<span style="white-space: nowrap">{}</span><br><span class="catalogue-stale" title="{}" '
        'style="color: var(--error-fg); white-space: nowrap">older than the catalogue</span><br>'
        '<span class="catalogue-figures" title="{}" style="white-space: nowrap">{}: {} / {}</span>',
        shown, title, title, entry.as_of.isoformat(), usd(float(entry.input_price)), usd(float(entry.output_price)))


class CataloguePricesFilter(admin.SimpleListFilter):
    """Models by how their prices stand against the catalogue."""

    title = "prices against the catalogue"
    parameter_name = "catalogue"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("stale", "older than the catalogue"), ("catalogued", "catalogued"),
                ("uncatalogued", "not catalogued")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[m.ProviderModel]) -> QuerySet[m.ProviderModel]:
        wanted = self.value()
        if wanted not in ("stale", "catalogued", "uncatalogued"):
            return queryset
        ids = []
        for model in queryset.select_related("provider"):
            found = catalogue().lookup(model.provider.kind, model.upstream) is not None
            if (wanted == "stale" and is_stale(model)) or (wanted == "catalogued" and found) or (
                    wanted == "uncatalogued" and not found):
                ids.append(model.pk)
        return queryset.filter(pk__in=ids)


def filled_message(entry: CatalogueEntry) -> str:
    note = f" ({entry.note})" if entry.note else ""
    return (f"Prices, limits and capabilities filled from the price catalogue{note}: read {entry.as_of} from "
            f"{entry.source}.")

