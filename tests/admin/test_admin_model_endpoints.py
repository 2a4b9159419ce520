"""The admin's model form takes endpoints, dimensions and family, refusing an incomplete embedding model naming
the field; a virtual model's targets of another embedding family are refused."""

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
    return {"provider": provider.pk, "upstream": "text-embedding-3-small", "name": "", "capabilities": ["text"],
            "model_class": "general", "enabled": "on", **fields}


def test_it_saves_an_embedding_model_and_bumps_the_version(admin_client: Client, provider: m.Provider) -> None:
    before = current_version()
    response = admin_client.post("/admin/routing/providermodel/add/", model_post(
        provider, endpoints=["embeddings"], dimensions="1536", family="text-embedding-3"))
    assert response.status_code == 302, response.content[:2000]
    row = m.ProviderModel.objects.get(name="openai/text-embedding-3-small")
    assert (row.endpoints, row.dimensions, row.family) == (["embeddings"], 1536, "text-embedding-3")
    assert current_version() > before


def test_no_endpoint_ticked_means_chat(admin_client: Client, provider: m.Provider) -> None:
    response = admin_client.post("/admin/routing/providermodel/add/", model_post(provider, upstream="gpt-4o"))
    assert response.status_code == 302, response.content[:2000]
    assert m.ProviderModel.objects.get(name="openai/gpt-4o").endpoints == ["chat"]


@pytest.mark.parametrize(("fields", "field", "message"), [
    ({"endpoints": ["embeddings"], "family": "text-embedding-3"}, "dimensions", "needs its vector size"),
    ({"endpoints": ["embeddings"], "dimensions": "1536"}, "family", "needs its family"),
    ({"dimensions": "1536"}, "dimensions", "only an embedding model"),
])
def test_it_refuses_an_incomplete_embedding_model_naming_the_field(
        admin_client: Client, provider: m.Provider, fields: dict[str, Any], field: str, message: str) -> None:
    response = admin_client.post("/admin/routing/providermodel/add/", model_post(provider, **fields))
    assert response.status_code == 200, "the form was accepted but should have been refused"
    errors = {k: list(v) for k, v in response.context["adminform"].form.errors.items()}
    assert field in errors, errors
    assert any(message in e for e in errors[field]), errors
    assert not m.ProviderModel.objects.exists()


def test_a_virtual_model_over_two_embedding_families_is_refused(admin_client: Client, provider: m.Provider) -> None:
    m.ProviderModel.objects.create(provider=provider, upstream="a", endpoints=["embeddings"], dimensions=8,
                                   family="one")
    m.ProviderModel.objects.create(provider=provider, upstream="b", endpoints=["embeddings"], dimensions=8,
                                   family="two")
    post = {"source": "embed", "strategy": "failover", "session_affinity": "on", "enabled": "on",
            "targets-TOTAL_FORMS": "2", "targets-INITIAL_FORMS": "0", "targets-MIN_NUM_FORMS": "0",
            "targets-MAX_NUM_FORMS": "1000",
            "targets-0-position": "0", "targets-0-target": "openai/a", "targets-0-weight": "1",
            "targets-1-position": "1", "targets-1-target": "openai/b", "targets-1-weight": "1"}
    response = admin_client.post("/admin/routing/virtualmodel/add/", post)
    assert response.status_code == 200, response.content[:2000]
    assert b"family" in response.content
    assert b"different embedding families" in response.content
    assert not m.VirtualModel.objects.exists()


def test_an_embedding_model_on_a_kind_without_embeddings_is_refused(admin_client: Client) -> None:
    claude = m.Provider.objects.create(name="claude", kind="anthropic", base_url="http://127.0.0.1:1")
    response = admin_client.post("/admin/routing/providermodel/add/", model_post(
        claude, endpoints=["embeddings"], dimensions="8", family="f"))
    assert response.status_code == 200, "the form was accepted but should have been refused"
    errors = {k: list(v) for k, v in response.context["adminform"].form.errors.items()}
    assert any("has no embeddings endpoint" in e for e in errors["endpoints"]), errors
