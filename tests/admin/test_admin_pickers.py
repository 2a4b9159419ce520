"""The admin's name fields offer the configured names: single names as a datalist while typing, a key's and a
team's allowed models as a multi-select; an unknown name is refused with the nearest ones."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from routing import models as m

pytestmark = pytest.mark.django_db

KEY_FORM = {"name": "ci", "team": "", "rpm": "", "tpm": "", "max_concurrency": "", "budget_usd": "",
            "budget_period": "month", "expires_at_0": "", "expires_at_1": ""}



@pytest.fixture
def catalogue() -> None:
    provider = m.Provider.objects.create(name="openai", kind="openai", base_url="http://127.0.0.1:1/v1")
    m.ProviderModel.objects.create(provider=provider, upstream="gpt-5", strengths=["reasoning"])
    m.ProviderModel.objects.create(provider=provider, upstream="gpt-5-mini", strengths=["fast"],
                                   model_class="document-extraction")
    m.VirtualModel.objects.create(source="frontier")
    m.TierRoute.objects.create(alias="normal", easy="openai/gpt-5-mini", hard="openai/gpt-5")
    m.CategoryRoute.objects.create(alias="by-topic", default_target="normal")


def datalist(html: str, input_name: str) -> list[str]:
    """The names the datalist of the input ``input_name`` offers."""
    field = re.search(rf'<input[^>]*name="{re.escape(input_name)}"[^>]*list="([^"]+)"', html)
    assert field is not None, f"{input_name} has no datalist"
    found = re.search(rf'<datalist id="{re.escape(field.group(1))}"[^>]*>(.*?)</datalist>', html, re.S)
    assert found is not None
    return re.findall(r'<option value="([^"]*)">', found.group(1))


def select_options(html: str, name: str) -> dict[str, str]:
    found = re.search(rf'<select[^>]*name="{name}"[^>]*multiple[^>]*>(.*?)</select>', html, re.S)
    assert found is not None, f"{name} is not a multi-select"
    return dict(re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', found.group(1)))


def errors_of(response: Any) -> dict[str, list[str]]:
    assert response.status_code == 200, "the form was accepted but should have been refused"
    return {k: list(v) for k, v in response.context["adminform"].form.errors.items()}


def test_target_fields_offer_the_models_and_virtual_models(admin_client: Client, catalogue: None) -> None:
    page = admin_client.get("/admin/routing/virtualmodel/add/").content.decode()
    assert datalist(page, "targets-0-target") == ["frontier", "openai/gpt-5", "openai/gpt-5-mini"]
    assert datalist(page, "targets-__prefix__-target")  # the row the admin's script clones has its own list
    page = admin_client.get("/admin/routing/tierroute/add/").content.decode()
    assert datalist(page, "easy") == datalist(page, "hard") == ["frontier", "openai/gpt-5", "openai/gpt-5-mini"]


def test_category_targets_offer_tier_aliases_too(admin_client: Client, catalogue: None) -> None:
    page = admin_client.get("/admin/routing/categoryroute/add/").content.decode()
    for field in ("code", "math", "default_target"):
        assert datalist(page, field) == ["frontier", "normal", "openai/gpt-5", "openai/gpt-5-mini"]


def test_a_policys_strength_offers_the_categories_and_the_tags_models_carry(admin_client: Client,
                                                                            catalogue: None) -> None:
    offered = datalist(admin_client.get("/admin/routing/routingpolicy/add/").content.decode(), "strength")
    assert offered[:2] == ["code", "writing"]
    assert offered[-2:] == ["fast", "reasoning"]


def test_allowed_models_are_a_multi_select_of_every_public_name(admin_client: Client, catalogue: None) -> None:
    for path in ("/admin/routing/gatewaykey/add/", "/admin/routing/team/add/"):
        page = admin_client.get(path).content.decode()
        assert list(select_options(page, "allowed_models")) == [
            "by-topic", "frontier", "normal", "openai/gpt-5", "openai/gpt-5-mini"]
        assert "SelectFilter2.js" in page  # the admin's filter box, served from this site's static files


def test_allowed_models_are_saved_as_a_list(admin_client: Client, catalogue: None) -> None:
    response = admin_client.post("/admin/routing/gatewaykey/add/",
                                 {**KEY_FORM, "allowed_models": ["normal", "openai/gpt-5"]})
    assert response.status_code == 302
    assert m.GatewayKey.objects.get(name="ci").allowed_models == ["normal", "openai/gpt-5"]


@pytest.mark.parametrize("path", ["/admin/routing/gatewaykey/add/", "/admin/routing/team/add/"])
def test_an_unknown_allowed_model_is_refused_with_the_nearest_names(admin_client: Client, catalogue: None,
                                                                    path: str) -> None:
    form = KEY_FORM if "gatewaykey" in path else {"name": "research", "budget_period": "month"}
    response = admin_client.post(path, {**form, "allowed_models": ["normal", "openai/gtp-5"]})
    [message] = errors_of(response)["allowed_models"]
    assert message.startswith('Unknown model "openai/gtp-5"')
    assert "Did you mean `openai/gpt-5`" in message
    assert not m.GatewayKey.objects.exists()
    assert not m.Team.objects.exists()


def test_a_stored_name_not_configured_stays_and_is_marked(admin_client: Client, catalogue: None) -> None:
    """The config file may name a model before it exists: editing the key keeps it, and says so."""
    key = m.GatewayKey(name="early", allowed_models=["normal", "coming-soon"])
    key.set_new_secret()
    key.save()
    page = admin_client.get(f"/admin/routing/gatewaykey/{key.pk}/change/").content.decode()
    options = select_options(page, "allowed_models")
    assert options["coming-soon"] == "coming-soon (not configured)"
    assert re.search(r'<option value="coming-soon"[^>]*selected', page)
    response = admin_client.post(f"/admin/routing/gatewaykey/{key.pk}/change/",
                                 {**KEY_FORM, "name": "early", "allowed_models": ["normal", "coming-soon"],
                                  "revoked": ""})
    assert response.status_code == 302
    key.refresh_from_db()
    assert key.allowed_models == ["normal", "coming-soon"]


def test_a_contracts_model_classes_are_picked_from_those_models_have(admin_client: Client, catalogue: None) -> None:
    assert datalist(admin_client.get("/admin/routing/providermodel/add/").content.decode(), "model_class") == [
        "document-extraction", "general"]  # a new model's class offers those in use, and may be a new one
    page = admin_client.get("/admin/routing/contract/add/").content.decode()
    assert list(select_options(page, "allowed_model_classes")) == ["document-extraction", "general"]
    form = {"workload": "invoice", "modalities": ["text"]}
    response = admin_client.post("/admin/routing/contract/add/",
                                 {**form, "allowed_model_classes": ["document-extractoin"]})
    [message] = errors_of(response)["allowed_model_classes"]
    assert message == ('Unknown model class "document-extractoin": use the class of some model. '
                       "Did you mean `document-extraction`?")
    response = admin_client.post("/admin/routing/contract/add/",
                                 {**form, "allowed_model_classes": ["document-extraction"]})
    assert response.status_code == 302
    assert m.Contract.objects.get(workload="invoice").allowed_model_classes == ["document-extraction"]
