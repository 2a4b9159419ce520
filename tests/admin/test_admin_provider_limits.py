"""The admin's model form takes the provider's rpm and tpm, and refuses bad values naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from routing import models as m
from routing.config.versioning import current_version

pytestmark = pytest.mark.django_db



@pytest.fixture
def provider() -> m.Provider:
    return m.Provider.objects.create(name="openai", kind="openai", base_url="http://127.0.0.1:1/v1")


def model_post(provider: m.Provider, **fields: Any) -> dict[str, Any]:
    return {"provider": provider.pk, "upstream": "gpt-4o-mini", "name": "", "capabilities": ["text"],
            "model_class": "general", "enabled": "on", **fields}


def test_it_saves_the_limits_and_bumps_the_version(admin_client: Client, provider: m.Provider) -> None:
    before = current_version()
    response = admin_client.post("/admin/routing/providermodel/add/", model_post(provider, rpm="500", tpm="90000"))
    assert response.status_code == 302, response.content[:2000]
    row = m.ProviderModel.objects.get(name="openai/gpt-4o-mini")
    assert (row.rpm, row.tpm) == (500, 90000)
    assert current_version() > before


def test_empty_limits_mean_no_limit(admin_client: Client, provider: m.Provider) -> None:
    response = admin_client.post("/admin/routing/providermodel/add/", model_post(provider, rpm="", tpm=""))
    assert response.status_code == 302
    row = m.ProviderModel.objects.get(name="openai/gpt-4o-mini")
    assert (row.rpm, row.tpm) == (None, None)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("rpm", "0", "greater than or equal to 1"),
    ("tpm", "-3", "greater than or equal to"),
    ("rpm", "many", "whole number"),
    ("tpm", "1.5", "whole number"),
])
def test_it_refuses_a_bad_limit_naming_the_field(admin_client: Client, provider: m.Provider, field: str, value: str,
                                                 message: str) -> None:
    response = admin_client.post("/admin/routing/providermodel/add/", model_post(provider, **{field: value}))
    assert response.status_code == 200, "the form was accepted but should have been refused"
    errors = {k: list(v) for k, v in response.context["adminform"].form.errors.items()}
    assert list(errors) == [field]
    assert any(message in e for e in errors[field]), errors
    assert not m.ProviderModel.objects.exists()
