"""Whose failure an attempt was, from the gateway's audit event to the stored attempt and the revision page."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from audit.models import AttemptRecord
from audit.services import revisions_ingest
from tests.audit.events import make_event

pytestmark = pytest.mark.django_db


def test_a_failure_the_client_caused_is_stored_and_shown_as_the_clients(client: Client) -> None:
    event = make_event("req-own-deadline", status=504, error_class="transient", target=None)
    event["attempts"] = [{
        "attempt_id": "c1", "seq": 1, "target": "openai/gpt-5", "provider": "openai", "status": None,
        "error_class": "transient", "reason": "timeout", "caused_by": "client", "latency_ms": 100.0,
        "ttfb_ms": None, "usage": {}, "cost_usd": None, "action": "gave_up", "validation": "not_run",
        "health": {"status": "healthy", "latency_ms": None, "in_flight": 0, "cooldown_until": None}}]
    revisions_ingest(events=[event, make_event("req-other")])

    stored = AttemptRecord.objects.get(attempt_id="c1")
    assert (stored.error_class, stored.reason, stored.health["caused_by"]) == ("transient", "timeout", "client")
    assert "caused_by" not in AttemptRecord.objects.get(revision__request_id="req-other", seq=1).health

    client.force_login(User.objects.create_superuser("root", password="x"))
    page = client.get(reverse("audit:revision", args=["req-own-deadline"])).content.decode()
    assert "(client&#x27;s)" in page or "(client's)" in page
