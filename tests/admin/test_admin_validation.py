"""The admin refuses configurations that cannot work, naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client, override_settings

from routing import models as m
from routing.config.versioning import current_version

pytestmark = pytest.mark.django_db

# Shaped like a real OpenAI key (assembled so the source itself holds nothing key-shaped).
RAW_KEY = "sk-" + "proj-" + "abcdefghijklmnopqrstuvwxyz" + "123456"



@pytest.fixture
def catalogue() -> m.Provider:
    provider = m.Provider.objects.create(name="openai", kind="openai", base_url="http://127.0.0.1:1/v1")
    m.ProviderModel.objects.create(provider=provider, upstream="gpt-4o-mini")
    m.ProviderModel.objects.create(provider=provider, upstream="gpt-5")
    return provider


def errors_of(response: Any) -> dict[str, list[str]]:
    """Field errors of the main form, plus inline errors under 'targets' and non-field ones under '__all__'."""
    assert response.status_code == 200, "the form was accepted but should have been refused"
    form = response.context["adminform"].form
    found: dict[str, list[str]] = {k: list(v) for k, v in form.errors.items()}
    for formset in response.context.get("inline_admin_formsets", []):
        for error in formset.formset.non_form_errors():
            found.setdefault("targets", []).append(error)
        for form_errors in formset.formset.errors:
            for field, messages in form_errors.items():
                found.setdefault(f"targets.{field}", []).extend(messages)
    return found


def virtual_model_post(source: str, targets: list[tuple[str, Any]], strategy: str = "adaptive") -> dict[str, Any]:
    data: dict[str, Any] = {
        "source": source, "strategy": strategy, "session_affinity": "on", "enabled": "on",
        "targets-TOTAL_FORMS": str(len(targets)), "targets-INITIAL_FORMS": "0",
        "targets-MIN_NUM_FORMS": "0", "targets-MAX_NUM_FORMS": "1000",
    }
    for i, (target, weight) in enumerate(targets):
        data[f"targets-{i}-target"] = target
        data[f"targets-{i}-weight"] = weight
        data[f"targets-{i}-position"] = i
    return data


def test_it_saves_a_valid_virtual_model_and_bumps_the_version(admin_client: Client, catalogue: m.Provider) -> None:
    before = current_version()
    response = admin_client.post(
        "/admin/routing/virtualmodel/add/",
        virtual_model_post("fast", [("openai/gpt-4o-mini", 1), ("openai/gpt-5", 2)]),
    )
    assert response.status_code == 302, errors_of(response)
    assert [t.target for t in m.VirtualModel.objects.get(source="fast").targets.all()] == [
        "openai/gpt-4o-mini", "openai/gpt-5"]
    assert current_version() == before + 1  # one change, one version, however many rows it touched


@pytest.mark.parametrize(
    ("targets", "field", "message"),
    [
        ([("no-such-model", 1)], "targets.target", 'unknown model "no-such-model"'),
        ([("openai/gpt-5", 0)], "targets.weight", "greater than 0"),
        ([("openai/gpt-5", -1)], "targets.weight", "greater than 0"),
        ([("openai/gpt-5", 1), ("openai/gpt-5", 1)], "targets", "duplicate data for target"),
    ],
)
def test_it_refuses_bad_targets(admin_client: Client, catalogue: m.Provider, targets, field, message) -> None:  # type: ignore[no-untyped-def]
    response = admin_client.post("/admin/routing/virtualmodel/add/", virtual_model_post("v", targets))
    errors = errors_of(response)
    assert any(message in e for e in errors.get(field, [])), errors
    assert not m.VirtualModel.objects.exists()


def test_it_refuses_a_cycle(admin_client: Client, catalogue: m.Provider) -> None:
    a = m.VirtualModel.objects.create(source="a")
    m.VirtualModelTarget.objects.create(virtual_model=a, target="openai/gpt-5")
    response = admin_client.post("/admin/routing/virtualmodel/add/", virtual_model_post("b", [("a", 1)]))
    assert response.status_code == 302
    b = m.VirtualModel.objects.get(source="b")
    # Now point a at b: a -> b -> a.
    data = virtual_model_post("a", [("b", 1)])
    response = admin_client.post(f"/admin/routing/virtualmodel/{a.pk}/change/", {
        **data, "targets-INITIAL_FORMS": "1", "targets-0-id": a.targets.get().pk, "targets-0-virtual_model": a.pk,
    })
    errors = errors_of(response)
    assert any("cycle: a -> b -> a" in e for e in errors.get("targets.target", [])), errors
    assert [t.target for t in a.targets.all()] == ["openai/gpt-5"]
    assert b.targets.get().target == "a"


def test_it_refuses_nesting_deeper_than_eight(admin_client: Client, catalogue: m.Provider) -> None:
    previous = "openai/gpt-5"
    for i in range(8):
        vm = m.VirtualModel.objects.create(source=f"v{i}")
        m.VirtualModelTarget.objects.create(virtual_model=vm, target=previous)
        previous = vm.source
    response = admin_client.post("/admin/routing/virtualmodel/add/", virtual_model_post("top", [(previous, 1)]))
    errors = errors_of(response)
    assert any("at most 8" in e for e in errors.get("targets", [])), errors


def test_it_refuses_a_duplicate_public_name(admin_client: Client, catalogue: m.Provider) -> None:
    response = admin_client.post("/admin/routing/virtualmodel/add/",
                                 virtual_model_post("openai/gpt-5", [("openai/gpt-4o-mini", 1)]))
    errors = errors_of(response)
    assert any("already used by a model" in e for e in errors["source"]), errors

    response = admin_client.post("/admin/routing/providermodel/add/", {
        "provider": catalogue.pk, "upstream": "other", "name": "openai/gpt-5", "capabilities": ["text"],
        "model_class": "general", "enabled": "on",
    })
    errors = errors_of(response)
    assert any("already exists" in e or "already used" in e for e in errors["name"]), errors


def test_it_refuses_an_unknown_tier_target(admin_client: Client, catalogue: m.Provider) -> None:
    response = admin_client.post("/admin/routing/tierroute/add/", {
        "alias": "normal", "easy": "openai/gpt-4o-mini", "hard": "missing", "enabled": "on",
    })
    errors = errors_of(response)
    assert any('Unknown model "missing"' in e for e in errors["hard"]), errors


def test_it_refuses_an_invalid_json_schema(admin_client: Client) -> None:
    response = admin_client.post("/admin/routing/contract/add/", {
        "workload": "invoice", "modalities": ["text"], "structured_output_required": "on",
        "schema": '{"type": "object", "properties": {"total": {"type": "money"}}}',
    })
    errors = errors_of(response)
    assert any("Invalid JSON schema" in e for e in errors["schema"]), errors


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("smart_routing_threshold", "0", "between 1 and 100"),
        ("min_weight_fraction", "0.7", "between 0 and 0.5"),
        ("warm_cache_weight", "0.5", "between 1 and 1000"),
    ],
)
def test_it_refuses_settings_out_of_range(admin_client: Client, field: str, value: str, message: str) -> None:
    response = admin_client.post("/admin/routing/routingsettings/add/", {field: value, "routing_objective": ""})
    errors = errors_of(response)
    assert any(message in e for e in errors[field]), errors


def test_it_refuses_a_raw_provider_key(admin_client: Client) -> None:
    response = admin_client.post("/admin/routing/provider/add/", {
        "name": "openai", "kind": "openai", "base_url": "https://api.openai.com/v1", "timeout_seconds": "600",
        "enabled": "on", "keys-TOTAL_FORMS": "1", "keys-INITIAL_FORMS": "0", "keys-MIN_NUM_FORMS": "0",
        "keys-MAX_NUM_FORMS": "1000", "keys-0-reference": RAW_KEY,
        "keys-0-position": "0",
    })
    errors = errors_of(response)
    assert any("reference to an environment variable" in e for e in errors["targets.reference"]), errors
    assert "abcdefghijklmnopqrstuvwxyz" not in response.content.decode()  # never echoed back
    assert not m.Provider.objects.exists()


def test_it_shows_a_new_gateway_key_once_and_stores_only_its_hash(admin_client: Client) -> None:
    response = admin_client.post("/admin/routing/gatewaykey/add/", {"name": "ci"},
                                 follow=True)
    shown = [str(message) for message in response.context["messages"] if "<code>" in str(message)]
    assert len(shown) == 1
    assert "gm-" in shown[0]
    secret = shown[0].split("<code>")[1].split("</code>")[0]
    key = m.GatewayKey.objects.get(name="ci")
    assert key.secret_hash == m.hash_secret(secret)
    page = admin_client.get(f"/admin/routing/gatewaykey/{key.pk}/change/").content.decode()
    assert secret not in page


def test_lists_are_searchable_and_filterable(admin_client: Client, catalogue: m.Provider) -> None:
    page = admin_client.get("/admin/routing/providermodel/?q=gpt-5").content.decode()
    assert "openai/gpt-5" in page
    assert "openai/gpt-4o-mini" not in page
    page = admin_client.get(f"/admin/routing/providermodel/?provider__id__exact={catalogue.pk}")
    assert page.status_code == 200


def provider_post(reference: str) -> dict[str, Any]:
    return {
        "name": "openai", "kind": "openai", "base_url": "https://api.openai.com/v1", "timeout_seconds": "600",
        "enabled": "on", "keys-TOTAL_FORMS": "1", "keys-INITIAL_FORMS": "0", "keys-MIN_NUM_FORMS": "0",
        "keys-MAX_NUM_FORMS": "1000", "keys-0-reference": reference, "keys-0-position": "0",
    }


@pytest.mark.parametrize("reference", ["${DJANGO_SECRET_KEY}", "${DATABASE_URL}", "${GOMODEL_MASTER_KEY}",
                                       "os.environ/REDIS_URL", "${PGPASSWORD}"])
def test_it_refuses_a_key_reference_to_the_gateways_own_settings(admin_client: Client, reference: str) -> None:
    response = admin_client.post("/admin/routing/provider/add/", provider_post(reference))
    errors = errors_of(response)
    variable = m.env_reference_name(reference)
    assert any(e.startswith(f"{variable} is reserved") for e in errors["targets.reference"]), errors
    assert not m.Provider.objects.exists()


def test_it_narrows_key_references_to_the_allow_list(admin_client: Client) -> None:
    with override_settings(GOMODEL_PROVIDER_KEY_ENV_ALLOW=("OPENAI_*",)):
        response = admin_client.post("/admin/routing/provider/add/", provider_post("${GROQ_API_KEY}"))
        errors = errors_of(response)
        assert errors["targets.reference"] == ["GROQ_API_KEY is not in GOMODEL_PROVIDER_KEY_ENV_ALLOW (OPENAI_*)."]
        response = admin_client.post("/admin/routing/provider/add/", provider_post("${OPENAI_API_KEY}"))
    assert response.status_code == 302
    assert list(m.ProviderKey.objects.values_list("reference", flat=True)) == ["${OPENAI_API_KEY}"]
