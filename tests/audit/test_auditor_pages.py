"""The auditor pages: the read-only auditors group reads every page and changes nothing."""

from __future__ import annotations

import csv
import io
import json
import time
from typing import Any

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from audit import admin as audit_admin
from audit.auditors import AUDITORS_GROUP, HIDDEN_ROUTING_MODELS
from audit.models import AuditRevision, ConfigRevision
from audit.services import config_revision_record, revisions_ingest
from tests.audit.events import make_event

pytestmark = pytest.mark.django_db

SESSION = "ab" * 32


@pytest.fixture
def auditor(client: Client) -> Client:
    user = User.objects.create_user("audrey", password="x", is_staff=True)
    user.groups.add(Group.objects.get(name=AUDITORS_GROUP))
    client.force_login(user)
    return client


@pytest.fixture
def recorded() -> list[str]:
    """A small history: a session that escalates from easy to hard, a failure, and two config versions."""
    config_revision_record(version=11, author="alice", source="file", snapshot={"settings": {}})
    config_revision_record(version=12, author="bob", source="admin",
                           snapshot={"settings": {"smart_routing_threshold": 5}})
    now = time.time()
    easy = make_event("req-easy", created_at=now - 60, session_hash=SESSION, attempts=[], cost_usd=0.001,
                      tier={"alias": "normal", "tier": "easy", "target": "normal-easy", "score": 2,
                            "signals": [{"name": "short", "points": 2, "detail": "short prompt"}]})
    hard = make_event("req-hard", created_at=now - 30, session_hash=SESSION)
    failed = make_event("req-failed", created_at=now - 10, session_hash="", status=503, error_class="transient",
                        target=None, key_name="=cmd|' /C calc'!A0", validation="not_run")
    revisions_ingest(events=[easy, hard, failed])
    return ["req-failed", "req-hard", "req-easy"]


def test_the_auditors_group_can_only_view_and_never_keys() -> None:
    perms = list(Group.objects.get(name=AUDITORS_GROUP).permissions.values_list("content_type__app_label",
                                                                                 "codename"))
    assert perms
    assert all(code.startswith("view_") for _, code in perms)
    codes = {f"{app}.{code}" for app, code in perms}
    assert {"audit.view_auditrevision", "audit.view_attemptrecord", "audit.view_configrevision"} <= codes
    for model in apps.get_app_config("routing").get_models():
        name = model._meta.model_name
        expected = name not in HIDDEN_ROUTING_MODELS
        assert (f"routing.view_{name}" in codes) is expected, name


def test_an_auditor_can_read_every_page(
    auditor: Client, recorded: list[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(audit_admin, "EXACT_COUNT_BELOW", 0)  # as a large table: the lists never COUNT(*)
    pages = [
        reverse("audit:history"),
        reverse("audit:history") + "?tier=hard&status=200&key=ci-bot&since=2020-01-01",
        reverse("audit:revision", args=["req-hard"]),
        reverse("audit:revision", args=["req-failed"]),
        reverse("audit:session", args=[SESSION]),
        reverse("audit:config_history"),
        reverse("audit:tuning"),
        reverse("audit:tuning") + "?since=2020-01-01&threshold=3",
        reverse("audit:export_csv"),
        reverse("audit:export_jsonl"),
        reverse("admin:audit_auditrevision_changelist"),
        reverse("admin:audit_auditrevision_change", args=[AuditRevision.objects.get(request_id="req-hard").pk]),
        reverse("admin:audit_configrevision_changelist"),
        reverse("admin:audit_attemptrecord_changelist"),
    ]
    for url in pages:
        with CaptureQueriesContext(connection) as queries:
            response = auditor.get(url)
        assert response.status_code == 200, url
        counting = [q["sql"] for q in queries.captured_queries if "COUNT(*)" in q["sql"].upper()
                    and "audit_auditrevision" in q["sql"] and "GROUP BY" not in q["sql"].upper()]
        assert not counting, (url, counting)


def test_an_auditor_cannot_change_anything(auditor: Client, recorded: list[str]) -> None:
    revision = AuditRevision.objects.get(request_id="req-hard")
    config = ConfigRevision.objects.get(version=12)
    forbidden = [
        ("get", reverse("admin:audit_auditrevision_add")),
        ("post", reverse("admin:audit_auditrevision_change", args=[revision.pk])),
        ("get", reverse("admin:audit_auditrevision_delete", args=[revision.pk])),
        ("post", reverse("admin:audit_configrevision_change", args=[config.pk])),
        ("get", reverse("admin:audit_configrevision_delete", args=[config.pk])),
    ]
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label != "routing":
            continue
        name = model._meta.model_name
        if name in HIDDEN_ROUTING_MODELS:
            forbidden.append(("get", reverse(f"admin:routing_{name}_changelist")))
        else:
            assert auditor.get(reverse(f"admin:routing_{name}_changelist")).status_code == 200, name
            if model_admin.has_add_permission.__func__ is admin.ModelAdmin.has_add_permission:
                forbidden.append(("get", reverse(f"admin:routing_{name}_add")))
    for method, url in forbidden:
        response = getattr(auditor, method)(url, {})
        assert response.status_code == 403, (method, url)
    assert auditor.post(reverse("audit:history")).status_code == 405
    assert AuditRevision.objects.filter(request_id="req-hard").exists()


def test_nobody_edits_audit_rows_in_the_admin_not_even_a_superuser(client: Client, recorded: list[str]) -> None:
    client.force_login(User.objects.create_superuser("root", password="x"))
    revision = AuditRevision.objects.get(request_id="req-hard")
    assert client.get(reverse("admin:audit_auditrevision_add")).status_code == 403
    assert client.get(reverse("admin:audit_auditrevision_delete", args=[revision.pk])).status_code == 403
    assert client.get(reverse("audit:revision", args=["req-hard"])).status_code == 200


def test_pages_need_a_login_and_the_view_permission(client: Client, recorded: list[str]) -> None:
    response = client.get(reverse("audit:history"))
    assert response.status_code == 302
    assert reverse("admin:login") in response["Location"]
    client.force_login(User.objects.create_user("nobody", password="x", is_staff=True))
    assert client.get(reverse("audit:history")).status_code == 403
    assert client.get(reverse("audit:export_csv")).status_code == 403


def test_the_request_page_explains_the_verdict_and_every_attempt(auditor: Client, recorded: list[str]) -> None:
    page = auditor.get(reverse("audit:revision", args=["req-hard"])).content.decode()
    for expected in [
        "score <strong>7.0</strong> against threshold 5",  # the threshold in force (config version 12)
        "code", "fenced code block", "length", "prompt over 6000 characters",
        "<strong>escalated</strong> by this request", "pin before this request: <strong>easy</strong>",
        "strategy <strong>adaptive</strong>", "p2c: lower load", "openai/gpt-5", "google/gemini", "cooling",
        "rate_limited", "<strong>fallback</strong>", "<strong>accepted</strong>", "429",
        "780.0 ms", "$0.012", "attempt timeline", "by bob",
        "Filtered out by the workload contract", "context window 4096 below the estimated input",
        "inside <span class=\"mono\">claude-pool</span>: strategy <strong>weighted</strong>",
    ]:
        assert expected in page, expected
    assert "alice@example.com" not in page


def test_the_session_page_shows_requests_in_order_and_the_pin_history(auditor: Client, recorded: list[str]) -> None:
    page = auditor.get(reverse("audit:session", args=[SESSION])).content.decode()
    assert page.index("req-easy") < page.index("req-hard")
    assert "first tier decision: score 2" in page
    assert "escalated from easy: score 7" in page
    assert "length (+4.0)" in page


def test_the_config_history_shows_diffs_authors_and_links_to_requests(auditor: Client, recorded: list[str]) -> None:
    page = auditor.get(reverse("audit:config_history")).content.decode()
    assert "Version 12" in page
    assert "bob" in page
    assert "alice" in page
    assert "+ settings.smart_routing_threshold: 5" in page
    assert reverse("audit:history") + "?config_version=12" in page


def test_history_pages_with_a_keyset_cursor_and_never_counts(auditor: Client) -> None:
    now = time.time()
    # Groups of three share a timestamp, so the id breaks ties across page boundaries.
    revisions_ingest(events=[make_event(f"p{i:03d}", created_at=now - (i // 3)) for i in range(130)])
    seen: list[str] = []
    url: str | None = reverse("audit:history") + "?size=50"
    with CaptureQueriesContext(connection) as queries:
        while url:
            response = auditor.get(url)
            seen += [r.request_id for r in response.context["rows"]]
            url = response.context["next_url"] and reverse("audit:history") + response.context["next_url"]
    assert len(seen) == len(set(seen)) == 130
    stored = list(AuditRevision.objects.order_by("-created_at", "-id").values_list("request_id", flat=True))
    assert seen == stored
    assert not [q["sql"] for q in queries.captured_queries if "COUNT(" in q["sql"].upper()]
    assert not [q["sql"] for q in queries.captured_queries if " OFFSET " in q["sql"].upper()]


def test_history_filters(auditor: Client, recorded: list[str]) -> None:
    def ids(query: str) -> list[str]:
        return [r.request_id for r in auditor.get(reverse("audit:history") + query).context["rows"]]

    assert ids("") == recorded
    assert ids("?status=5xx") == ["req-failed"]
    assert ids("?status=error") == ["req-failed"]
    assert ids("?tier=easy") == ["req-easy"]
    assert ids("?key=ci-bot") == ["req-hard", "req-easy"]
    assert ids("?key=3") == recorded
    assert ids(f"?session={SESSION}") == ["req-hard", "req-easy"]
    assert ids("?target=anthropic/claude&model=normal") == ["req-hard", "req-easy"]
    assert ids("?error_class=transient") == ["req-failed"]
    assert ids("?config_version=12") == recorded
    assert ids("?since=2999-01-01") == []
    response = auditor.get(reverse("audit:history") + "?since=yesterday&cursor=%%%")
    assert response.status_code == 200
    assert len(response.context["errors"]) == 2


def test_exports_stream_the_filtered_history(auditor: Client, recorded: list[str]) -> None:
    response = auditor.get(reverse("audit:export_csv") + "?session=" + SESSION)
    assert response.streaming
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [r["request_id"] for r in rows] == ["req-hard", "req-easy"]
    assert rows[0]["tier"] == "hard"
    assert rows[0]["cost_usd"] == "0.012"
    assert rows[0]["attempt_count"] == "2"

    everything = auditor.get(reverse("audit:export_csv"))
    failed = next(r for r in csv.DictReader(io.StringIO(b"".join(everything.streaming_content).decode()))
                  if r["request_id"] == "req-failed")
    assert failed["key_name"].startswith("'=")  # never evaluated as a spreadsheet formula

    response = auditor.get(reverse("audit:export_jsonl") + "?tier=hard&status=200")
    lines = b"".join(response.streaming_content).splitlines()
    records: list[dict[str, Any]] = [json.loads(line) for line in lines]
    assert [r["request_id"] for r in records] == ["req-hard"]
    assert [a["action"] for a in records[0]["attempts"]] == ["fallback", "accepted"]
    assert records[0]["signals"][0]["name"] == "code"


def test_the_tuning_page_marks_the_threshold_and_prices_other_thresholds(auditor: Client, recorded: list[str]) -> None:
    page = auditor.get(reverse("audit:tuning")).content.decode()
    assert "threshold 5" in page  # the marker, from config version 12
    assert "<svg" in page
    assert "Score histogram" in page
    assert "Cost per accepted answer" in page
    outcomes = auditor.get(reverse("audit:tuning")).context["outcomes"]
    by_threshold = {o.threshold: o for o in outcomes}
    assert by_threshold[5].current
    assert by_threshold[5].hard == 2
    assert by_threshold[5].total == 3
    assert by_threshold[1].hard == 3
    assert by_threshold[8].hard == 0
