"""The admin edits category routes, model strengths and category keywords, refusing what cannot work by field."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from routing import models as m
from routing.config.versioning import current_version

pytestmark = pytest.mark.django_db



@pytest.fixture
def catalogue() -> m.Provider:
    provider = m.Provider.objects.create(name="openai", kind="openai", base_url="http://127.0.0.1:1/v1")
    m.ProviderModel.objects.create(provider=provider, upstream="coder")
    m.ProviderModel.objects.create(provider=provider, upstream="mini")
    m.TierRoute.objects.create(alias="normal", easy="openai/mini", hard="openai/coder")
    return provider


def errors_of(response: Any) -> dict[str, list[str]]:
    assert response.status_code == 200, "the form was accepted but should have been refused"
    return {k: list(v) for k, v in response.context["adminform"].form.errors.items()}


def route_post(**fields: str) -> dict[str, str]:
    data = {"alias": "smart", "default_target": "openai/mini", "enabled": "on"}
    data.update(fields)
    return data


def test_it_saves_a_route_whose_code_target_is_a_tier_alias(admin_client: Client, catalogue: m.Provider) -> None:
    version = current_version()
    response = admin_client.post("/admin/routing/categoryroute/add/", route_post(code="normal", math="openai/coder"))
    assert response.status_code == 302, errors_of(response)
    route = m.CategoryRoute.objects.get(alias="smart")
    assert route.category_targets() == {"code": "normal", "math": "openai/coder"}
    assert current_version() == version + 1


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"writing": "missing"}, "writing", 'Unknown model "missing"'),
        ({"default_target": "nowhere"}, "default_target", 'Unknown model "nowhere"'),
        ({"vision": "smart"}, "vision", "Cycle: smart -> smart"),
        ({"alias": "normal"}, "alias", 'already used by a tier route'),
        ({"alias": "openai/mini"}, "alias", 'already used by a model'),
        ({"default_target": ""}, "default_target", "This field is required"),
    ],
)
def test_it_refuses_a_bad_route_naming_the_field(admin_client: Client, catalogue: m.Provider,
                                                 fields: dict[str, str], field: str, message: str) -> None:
    response = admin_client.post("/admin/routing/categoryroute/add/", route_post(**fields))
    errors = errors_of(response)
    assert any(message in e for e in errors[field]), errors
    assert not m.CategoryRoute.objects.filter(alias=fields.get("alias", "smart")).exists() or field == "alias"


def test_it_refuses_a_route_pointing_at_another_category_route(admin_client: Client,
                                                               catalogue: m.Provider) -> None:
    m.CategoryRoute.objects.create(alias="first", default_target="openai/mini")
    response = admin_client.post("/admin/routing/categoryroute/add/", route_post(math="first"))
    assert any('"first" is a category route' in e for e in errors_of(response)["math"])


def test_a_tier_route_may_not_take_a_category_routes_name(admin_client: Client, catalogue: m.Provider) -> None:
    m.CategoryRoute.objects.create(alias="smart", default_target="openai/mini")
    response = admin_client.post("/admin/routing/tierroute/add/", {
        "alias": "smart", "easy": "openai/mini", "hard": "openai/coder", "enabled": "on"})
    assert any("already used by a category route" in e for e in errors_of(response)["alias"])


def test_it_saves_model_strengths_as_free_form_tags(admin_client: Client, catalogue: m.Provider) -> None:
    response = admin_client.post("/admin/routing/providermodel/add/", {
        "provider": catalogue.pk, "upstream": "writer", "capabilities": ["text"],
        "strengths": "writing, analysis reasoning", "model_class": "general", "enabled": "on"})
    assert response.status_code == 302, errors_of(response)
    assert m.ProviderModel.objects.get(name="openai/writer").strengths == ["writing", "analysis", "reasoning"]
    page = admin_client.get(f"/admin/routing/providermodel/{m.ProviderModel.objects.get(name='openai/writer').pk}"
                            "/change/")
    assert 'value="writing, analysis, reasoning"' in page.content.decode()
    refused = admin_client.post("/admin/routing/providermodel/add/", {
        "provider": catalogue.pk, "upstream": "poet", "capabilities": ["text"], "strengths": "po/etry",
        "model_class": "general", "enabled": "on"})
    assert any("'po/etry' is not a tag" in e for e in errors_of(refused)["strengths"])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('{"vision": ["photo"]}', "Unknown keyword categories: vision"),
        ('{"code": []}', "non-empty list"),
        ('["code"]', "Expected a mapping"),
    ],
)
def test_it_refuses_bad_category_keywords(admin_client: Client, value: str, message: str) -> None:
    response = admin_client.post("/admin/routing/routingsettings/add/",
                                 {"category_keywords": value, "routing_objective": ""})
    assert any(message in e for e in errors_of(response)["category_keywords"])


def test_it_saves_category_keywords_and_the_threshold(admin_client: Client) -> None:
    response = admin_client.post("/admin/routing/routingsettings/add/", {
        "category_keywords": '{"writing": ["limerick"]}', "category_long_context_tokens": "64000",
        "routing_objective": ""})
    assert response.status_code == 302, errors_of(response)
    row = m.RoutingSettings.objects.get()  # the one row (its id depends on what earlier tests created)
    assert (row.category_keywords, row.category_long_context_tokens) == ({"writing": ["limerick"]}, 64000)
    refused = admin_client.post(f"/admin/routing/routingsettings/{row.pk}/change/", {
        "category_long_context_tokens": "0", "routing_objective": ""})
    assert any("between 1 and 10000000" in e for e in errors_of(refused)["category_long_context_tokens"])
