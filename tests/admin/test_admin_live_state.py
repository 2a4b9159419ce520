"""The admin shows each virtual model's live target state, read from the process serving the page."""

from __future__ import annotations

import os
import time

import pytest
from django.contrib.auth.models import User
from django.test import Client

from routing import models as m
from routing.config.runtime import compile_table, runtime
from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.gateway.state import state

pytestmark = pytest.mark.django_db


def test_it_shows_weight_latency_in_flight_and_cooldown(client: Client) -> None:
    provider = m.Provider.objects.create(name="p", kind="openai", base_url="http://127.0.0.1:9/v1")
    m.ProviderModel.objects.create(provider=provider, upstream="fast")
    m.ProviderModel.objects.create(provider=provider, upstream="limited")
    vm = m.VirtualModel.objects.create(source="pool", strategy="adaptive")
    m.VirtualModelTarget.objects.create(virtual_model=vm, target="p/fast", weight=2, position=0)
    m.VirtualModelTarget.objects.create(virtual_model=vm, target="p/limited", weight=1, position=1)
    runtime.swap(compile_table(version=99))
    state.reset()
    now = time.monotonic()
    state.health.get("p/fast").record(AttemptOutcome.success(0.12), now)
    state.health.get("p/fast").begin(now)
    state.health.get("p/limited").record(
        AttemptOutcome.failure(ErrorClass.TRANSIENT, "rate_limited", status=429, retry_after_s=20), now)

    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    page = client.get(f"/admin/routing/virtualmodel/{vm.pk}/change/").content.decode()
    assert f"worker process {os.getpid()}" in page
    assert "p/fast" in page
    assert "120.0 ms" in page
    assert "healthy" in page
    assert "cooling" in page
    assert "rate_limited" in page
    assert "UTC" in page
    state.reset()
