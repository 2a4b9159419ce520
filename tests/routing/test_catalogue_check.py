"""``manage.py check --database default`` warns of prices older than the price catalogue's, naming the model."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from io import StringIO

import pytest
from django.core.checks import Tags, run_checks
from django.core.management import call_command

from routing import models as m
from routing.catalogue_check import STALE_PRICES
from routing.config.catalogue import catalogue

pytestmark = pytest.mark.django_db


def test_it_warns_of_each_stale_model_only_when_asked_for_database_checks() -> None:
    provider = m.Provider.objects.create(name="oa", kind="openai", base_url="http://127.0.0.1:1/v1")
    entry = catalogue().lookup("openai", "gpt-4o")
    assert entry is not None
    m.ProviderModel.objects.create(provider=provider, upstream="gpt-4o", input_price=Decimal("5"),
                                   output_price=Decimal("15"), prices_as_of=dt.date(2024, 5, 13))
    m.ProviderModel.objects.create(provider=provider, upstream="gpt-4o-mini", input_price=Decimal("0.15"),
                                   output_price=Decimal("0.6"), cached_input_price=Decimal("0.075"))
    m.ProviderModel.objects.create(provider=provider, upstream="in-house", input_price=Decimal("9"),
                                   output_price=Decimal("9"))
    found = [c for c in run_checks(tags=[Tags.database], databases=["default"]) if c.id == STALE_PRICES]
    assert [c.obj.name for c in found] == ["oa/gpt-4o"]
    assert found[0].msg == (
        f"The prices of oa/gpt-4o (set 2024-05-13) are older than the price catalogue's, read {entry.as_of} from "
        f"{entry.source}: $2.50 in / $10.00 out per 1M tokens.")
    assert not [c for c in run_checks() if c.id == STALE_PRICES]  # a plain check reads no database
    out = StringIO()
    call_command("check", "--database", "default", stderr=out, stdout=out)
    assert "routing.W001" in out.getvalue()
