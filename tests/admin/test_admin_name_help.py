"""The admin helps with names: target fields suggest the nearest names, slash-free aliases never collide, and
strengths are free-form tags a routing policy may select by (never losing the last model that carries one)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from routing import models as m

pytestmark = pytest.mark.django_db



@pytest.fixture
def catalogue() -> m.Provider:
    provider = m.Provider.objects.create(name="openai", kind="openai", base_url="http://127.0.0.1:1/v1")
    m.ProviderModel.objects.create(provider=provider, upstream="gpt-5", strengths=["reasoning"])
    m.ProviderModel.objects.create(provider=provider, upstream="gpt-5-mini", strengths=["fast"])
    m.VirtualModel.objects.create(source="frontier")
    m.TierRoute.objects.create(alias="normal", easy="openai/gpt-5-mini", hard="openai/gpt-5")
    return provider


def errors_of(response: Any) -> dict[str, list[str]]:
    assert response.status_code == 200, "the form was accepted but should have been refused"
    found = {k: list(v) for k, v in response.context["adminform"].form.errors.items()}
    for formset in response.context.get("inline_admin_formsets", []):
        for form_errors in formset.formset.errors:
            for field, messages in form_errors.items():
                found.setdefault(f"targets.{field}", []).extend(messages)
    return found


def model_post(provider: m.Provider, **fields: str) -> dict[str, Any]:
    return {"provider": provider.pk, "upstream": "x", "capabilities": ["text"], "model_class": "general",
            "enabled": "on", **fields}


def test_a_virtual_models_unknown_target_suggests_the_nearest_names(admin_client: Client,
                                                                    catalogue: m.Provider) -> None:
    response = admin_client.post("/admin/routing/virtualmodel/add/", {
        "source": "pool", "strategy": "adaptive", "session_affinity": "on", "enabled": "on",
        "targets-TOTAL_FORMS": "1", "targets-INITIAL_FORMS": "0", "targets-MIN_NUM_FORMS": "0",
        "targets-MAX_NUM_FORMS": "1000", "targets-0-target": "openai/gtp-5", "targets-0-weight": "1",
        "targets-0-position": "0"})
    [message] = errors_of(response)["targets.target"]
    assert message.startswith('unknown model "openai/gtp-5". Did you mean `openai/gpt-5`')


def test_a_tier_routes_unknown_target_suggests_the_nearest_names(admin_client: Client,
                                                                 catalogue: m.Provider) -> None:
    response = admin_client.post("/admin/routing/tierroute/add/", {
        "alias": "assistant", "easy": "openai/gpt-5-mimi", "hard": "fronteir", "enabled": "on"})
    errors = errors_of(response)
    assert "Did you mean `openai/gpt-5-mini`" in errors["easy"][0]
    assert errors["hard"][0].endswith("Did you mean `frontier`?")


def test_a_category_routes_unknown_target_suggests_tier_aliases_too(admin_client: Client,
                                                                    catalogue: m.Provider) -> None:
    response = admin_client.post("/admin/routing/categoryroute/add/", {
        "alias": "smart", "default_target": "nromal", "enabled": "on"})
    [message] = errors_of(response)["default_target"]
    assert message == 'Unknown model "nromal". Did you mean `normal`?'


def test_a_suggestion_is_left_out_when_nothing_is_close(admin_client: Client, catalogue: m.Provider) -> None:
    response = admin_client.post("/admin/routing/tierroute/add/", {
        "alias": "assistant", "easy": "zzzzzz", "hard": "openai/gpt-5", "enabled": "on"})
    assert errors_of(response)["easy"] == ['Unknown model "zzzzzz": use a model\'s public name or a virtual model.']


def test_a_models_slash_free_alias_may_not_meet_another_public_name(admin_client: Client,
                                                                    catalogue: m.Provider) -> None:
    m.VirtualModel.objects.create(source="acme--big")
    other = m.Provider.objects.create(name="acme", kind="openai", base_url="http://127.0.0.1:1/v1")
    response = admin_client.post("/admin/routing/providermodel/add/", model_post(other, upstream="big"))
    assert errors_of(response)["name"] == [
        'The name "acme/big" is already used by a virtual model (the slash-free alias "acme--big" of this name).']


def test_a_public_name_may_not_take_a_models_slash_free_alias(admin_client: Client, catalogue: m.Provider) -> None:
    response = admin_client.post("/admin/routing/tierroute/add/", {
        "alias": "openai--gpt-5", "easy": "openai/gpt-5-mini", "hard": "openai/gpt-5", "enabled": "on"})
    assert errors_of(response)["alias"] == [
        'The name "openai--gpt-5" is already used by a model ("openai/gpt-5", whose slash-free alias it is).']


def test_a_policy_may_select_by_a_tag_a_model_carries(admin_client: Client, catalogue: m.Provider) -> None:
    response = admin_client.post("/admin/routing/routingpolicy/add/", {
        "name": "think", "strategy": "strength", "strength": "reasoning", "max_latency_ms": "", "max_cost_usd": "",
        "fallback_to": ""})
    assert response.status_code == 302
    assert m.RoutingPolicy.objects.get(name="think").strength == "reasoning"
    refused = admin_client.post("/admin/routing/routingpolicy/add/", {
        "name": "quick", "strategy": "strength", "strength": "fats", "max_latency_ms": "", "max_cost_usd": "",
        "fallback_to": ""})
    [message] = errors_of(refused)["strength"]
    assert message.startswith('Unknown strength "fats": neither a category nor a tag a model carries. '
                              "Did you mean `fast`?")


def test_a_model_may_not_drop_the_last_tag_a_policy_selects_by(admin_client: Client, catalogue: m.Provider) -> None:
    m.RoutingPolicy.objects.create(name="think", strategy="strength", strength="reasoning")
    model = m.ProviderModel.objects.get(name="openai/gpt-5")
    response = admin_client.post(f"/admin/routing/providermodel/{model.pk}/change/", model_post(
        catalogue, upstream="gpt-5", name="openai/gpt-5", strengths="code"))
    assert errors_of(response)["strengths"] == [
        'The routing policy "think" selects by "reasoning", which no other model carries; change the policy first.']
    kept = admin_client.post(f"/admin/routing/providermodel/{model.pk}/change/", model_post(
        catalogue, upstream="gpt-5", name="openai/gpt-5", strengths="reasoning, code"))
    assert kept.status_code == 302
