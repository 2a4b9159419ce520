"""The model admin and the price catalogue: a new catalogued model's empty fields filled on save, its prices dated,
and a model whose prices are older than the catalogue's flagged in the list."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from routing import models as m
from routing.config.catalogue import catalogue

pytestmark = pytest.mark.django_db

ADD = "/admin/routing/providermodel/add/"
LIST = "/admin/routing/providermodel/"



@pytest.fixture
def provider() -> m.Provider:
    return m.Provider.objects.create(name="claude", kind="anthropic", base_url="http://127.0.0.1:1")


def model_post(provider: m.Provider, **fields: Any) -> dict[str, Any]:
    return {"provider": provider.pk, "upstream": "claude-haiku-4-5", "name": "", "model_class": "general",
            "enabled": "on", **fields}


def test_it_fills_an_empty_catalogued_model_on_save_and_says_from_where(
        admin_client: Client, provider: m.Provider) -> None:
    response = admin_client.post(ADD, model_post(provider), follow=True)
    assert response.status_code == 200
    row = m.ProviderModel.objects.get(name="claude/claude-haiku-4-5")
    entry = catalogue().lookup("anthropic", "claude-haiku-4-5")
    assert entry is not None
    assert (row.input_price, row.output_price, row.cached_input_price) == (
        Decimal("1"), Decimal("5"), Decimal("0.1"))
    assert (row.context_window, row.max_output_tokens) == (200000, 64000)
    assert row.capabilities == list(entry.capabilities)
    assert row.prices_as_of == entry.as_of
    assert f"filled from the price catalogue: read {entry.as_of} from {entry.source}" in response.content.decode()


def test_it_keeps_typed_prices_and_dates_them_today(admin_client: Client, provider: m.Provider) -> None:
    response = admin_client.post(ADD, model_post(provider, input_price="0.8", output_price="4",
                                                 capabilities=["text"]))
    assert response.status_code == 302, response.content[:2000]
    row = m.ProviderModel.objects.get(name="claude/claude-haiku-4-5")
    assert (row.input_price, row.output_price, row.cached_input_price) == (Decimal("0.8"), Decimal("4"), None)
    assert row.context_window is None
    assert row.capabilities == ["text"]
    assert row.prices_as_of == timezone.localdate()


def test_it_dates_typed_prices_equal_to_the_catalogue_with_its_date(
        admin_client: Client, provider: m.Provider) -> None:
    entry = catalogue().lookup("anthropic", "claude-haiku-4-5")
    assert entry is not None
    response = admin_client.post(ADD, model_post(provider, input_price="1.00", output_price="5",
                                                 cached_input_price="0.1", capabilities=["text"]))
    assert response.status_code == 302, response.content[:2000]
    assert m.ProviderModel.objects.get(name="claude/claude-haiku-4-5").prices_as_of == entry.as_of


def test_it_leaves_an_uncatalogued_model_empty_and_undated(admin_client: Client, provider: m.Provider) -> None:
    response = admin_client.post(ADD, model_post(provider, upstream="my-claude-fine-tune"))
    assert response.status_code == 302, response.content[:2000]
    row = m.ProviderModel.objects.get(name="claude/my-claude-fine-tune")
    assert (row.input_price, row.prices_as_of, row.capabilities) == (None, None, ["text"])


def test_it_keeps_the_date_when_a_change_leaves_the_prices_alone(
        admin_client: Client, provider: m.Provider) -> None:
    row = m.ProviderModel.objects.create(provider=provider, upstream="claude-haiku-4-5", input_price=Decimal("0.8"),
                                         output_price=Decimal("4"), prices_as_of=dt.date(2025, 11, 1))
    response = admin_client.post(f"{LIST}{row.pk}/change/", model_post(
        provider, name=row.name, input_price="0.8", output_price="4", capabilities=["text", "tools"]))
    assert response.status_code == 302, response.content[:2000]
    row.refresh_from_db()
    assert (row.capabilities, row.prices_as_of) == (["text", "tools"], dt.date(2025, 11, 1))


def test_it_flags_prices_older_than_the_catalogue_in_the_list(admin_client: Client, provider: m.Provider) -> None:
    entry = catalogue().lookup("anthropic", "claude-haiku-4-5")
    assert entry is not None
    m.ProviderModel.objects.create(provider=provider, upstream="claude-haiku-4-5", input_price=Decimal("0.8"),
                                   output_price=Decimal("4"), prices_as_of=entry.as_of - dt.timedelta(days=90))
    m.ProviderModel.objects.create(provider=provider, upstream="claude-sonnet-4-5", input_price=Decimal("3"),
                                   output_price=Decimal("15"), cached_input_price=Decimal("0.3"))
    m.ProviderModel.objects.create(provider=provider, upstream="claude-opus-4-5", input_price=Decimal("4"),
                                   output_price=Decimal("20"), prices_as_of=entry.as_of)
    page = admin_client.get(LIST).content.decode()
    assert page.count(">older than the catalogue</span>") == 1
    assert f'<span class="catalogue-figures" title="The price catalogue&#x27;s figures, read {entry.as_of} from ' \
           f'{entry.source}" style="white-space: nowrap">{entry.as_of}: $1.00 / $5.00</span>' in page
    stale = admin_client.get(LIST, {"catalogue": "stale"}).content.decode()
    assert "claude/claude-haiku-4-5" in stale
    assert "claude/claude-sonnet-4-5" not in stale  # the catalogue's prices, of unknown date: current
    assert "claude/claude-opus-4-5" not in stale  # set by hand on the catalogue's day: the operator's own
