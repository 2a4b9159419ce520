"""The admin edits routing policies and refuses what cannot work next to the field: cycles, a strength strategy
without a strength, a cost bound of 0; deleting a policy another one falls back to is refused."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from routing import models as m
from routing.config import versioning
from routing.config.versioning import current_version

pytestmark = pytest.mark.django_db



def errors_of(response: Any) -> dict[str, list[str]]:
    assert response.status_code == 200, "the form was accepted but should have been refused"
    return {k: list(v) for k, v in response.context["adminform"].form.errors.items()}


def policy_post(**fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"name": "fast", "strategy": "latency", "strength": "", "max_latency_ms": "",
                            "max_cost_usd": "", "fallback_to": ""}
    data.update(fields)
    return data


def test_it_saves_a_policy_with_a_fallback_and_moves_the_version(admin_client: Client) -> None:
    default = m.RoutingPolicy.objects.create(name="default", strategy="priority")
    version = current_version()
    response = admin_client.post("/admin/routing/routingpolicy/add/",
                                 policy_post(max_latency_ms="800", max_cost_usd="0.05", fallback_to=str(default.pk)))
    assert response.status_code == 302, errors_of(response)
    policy = m.RoutingPolicy.objects.get(name="fast")
    assert policy.as_fields() == {"strategy": "latency", "max_latency_ms": 800, "max_cost_usd": 0.05,
                                  "fallback_to": "default"}
    assert current_version() == version + 1


def test_a_cycle_is_refused_naming_it(admin_client: Client) -> None:
    first = m.RoutingPolicy.objects.create(name="cheap", strategy="cost")
    fast = m.RoutingPolicy.objects.create(name="fast", strategy="latency")
    first.fallback_to = fast
    first.save()
    version = versioning.flush()  # the set-up's own change counts before the admin's
    response = admin_client.post(f"/admin/routing/routingpolicy/{fast.pk}/change/",
                                 policy_post(fallback_to=str(first.pk)))
    assert errors_of(response) == {"fallback_to": ["Cycle: fast -> cheap -> fast."]}
    assert current_version() == version
    own = admin_client.post(f"/admin/routing/routingpolicy/{fast.pk}/change/", policy_post(fallback_to=str(fast.pk)))
    assert errors_of(own) == {"fallback_to": ["Cycle: fast -> fast."]}


def test_bad_fields_are_refused_next_to_the_field(admin_client: Client) -> None:
    response = admin_client.post("/admin/routing/routingpolicy/add/", policy_post(strategy="strength"))
    assert errors_of(response) == {"strength": ["The strength strategy needs a strength."]}
    response = admin_client.post("/admin/routing/routingpolicy/add/", policy_post(strategy="cost", max_cost_usd="0"))
    assert errors_of(response) == {"max_cost_usd": ["Must be a number greater than 0, got 0.0."]}
    response = admin_client.post("/admin/routing/routingpolicy/add/", policy_post(name="bad name!"))
    assert "name" in errors_of(response)
    assert not m.RoutingPolicy.objects.exists()


def test_a_policy_another_falls_back_to_cannot_be_deleted(admin_client: Client) -> None:
    default = m.RoutingPolicy.objects.create(name="default", strategy="priority")
    m.RoutingPolicy.objects.create(name="fast", strategy="latency", fallback_to=default)
    response = admin_client.post(f"/admin/routing/routingpolicy/{default.pk}/delete/", {"post": "yes"})
    assert response.status_code == 200
    assert m.RoutingPolicy.objects.filter(name="default").exists()


def test_the_list_shows_the_policies(admin_client: Client) -> None:
    m.RoutingPolicy.objects.create(name="writer", strategy="strength", strength="writing")
    response = admin_client.get("/admin/routing/routingpolicy/")
    assert response.status_code == 200
    assert b"writer" in response.content
