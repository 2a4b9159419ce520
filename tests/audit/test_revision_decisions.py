"""The request page shows the decisions the gateway records (team, billed spend, the limit that refused the
request, the category route, the routing policy, exploration and cold start, a capability escalation, provider
limits among the skipped), each only when the revision holds it; the history filters by category, policy and
limit on their own partial indexes; the exports carry the new columns; the event's ``limit`` is coerced."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import time
import uuid
from html.parser import HTMLParser
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client
from django.urls import reverse

from audit.auditors import AUDITORS_GROUP
from audit.delivery.event import prepare_event
from audit.models import AuditRevision
from audit.selectors import HistoryFilters, filtered_revisions
from audit.services import revisions_ingest
from tests.audit.events import make_event

CATEGORY = {"category": "code", "category_rule": "keywords", "category_detail": "refactor*",
            "category_alias": "smart", "category_target": "normal"}
POLICY = {
    "policy": "cheap",
    "policy_chain": "fast>cheap",
    "policy_decision": {
        "selected": "fast", "source": "header", "policy": "cheap", "strategy": "cost",
        "steps": [{"from": "fast", "to": "cheap", "virtual_model": "normal-hard", "reason": "max_latency_ms"}],
        "applied_to": ["normal-hard"], "unmet": "",
    },
}
SECTIONS = ("limit", "category", "policy", "exploration", "billed", "tier-escalation")


@pytest.fixture
def auditor(client: Client) -> Client:
    user = User.objects.create_user("audrey", password="x", is_staff=True)
    user.groups.add(Group.objects.get(name=AUDITORS_GROUP))
    client.force_login(user)
    return client


def page_of(auditor: Client, request_id: str) -> str:
    response = auditor.get(reverse("audit:revision", args=[request_id]))
    assert response.status_code == 200
    return response.content.decode()


class _ElementText(HTMLParser):
    """Collects the text inside the element with a given id (nested elements included)."""

    VOID = {"br", "hr", "img", "input", "meta", "link", "wbr"}
    BLOCK = {"p", "div", "dt", "dd", "td", "th", "tr", "li", "h2", "h3"}

    def __init__(self, element_id: str) -> None:
        super().__init__(convert_charrefs=True)
        self.element_id = element_id
        self.depth = 0  # >0 while inside the element
        self.found = False
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.VOID:
            return
        if self.depth:
            self.depth += 1
        elif dict(attrs).get("id") == self.element_id:
            self.depth, self.found = 1, True

    def handle_endtag(self, tag: str) -> None:
        if self.depth and tag not in self.VOID:
            self.depth -= 1
            if tag in self.BLOCK:
                self.parts.append(" ")

    def handle_data(self, data: str) -> None:
        if self.depth:
            self.parts.append(data)


def section(page: str, element_id: str) -> str:
    """The text of the element with id ``element_id``, whitespace collapsed."""
    parser = _ElementText(element_id)
    parser.feed(page)
    assert parser.found, f"no element with id {element_id}"
    return " ".join("".join(parser.parts).split())


def ingest(request_id: str, **overrides: Any) -> None:
    revisions_ingest(events=[make_event(request_id, **overrides)])


# -- the request page --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_plain_request_shows_none_of_the_decision_sections(auditor: Client) -> None:
    # A decision of empty names is what a request without a policy came out as when the worker prepared it again.
    empty_policy = {"selected": "", "source": "", "policy": "", "strategy": "", "steps": [], "applied_to": [],
                    "unmet": ""}
    AuditRevision.objects.create(request_id="plain", created_at=dt.datetime.now(dt.UTC), requested_model="gpt-5",
                                 target="openai/gpt-5", status=200, cost_usd=0.01, policy_detail=empty_policy)
    page = page_of(auditor, "plain")
    for name in SECTIONS:
        assert f'id="{name}"' not in page, name
    assert "<dt>Team</dt>" not in page
    assert "Skipped:" not in page


@pytest.mark.django_db
def test_it_shows_the_team_with_a_link_to_its_history_and_what_the_providers_billed(auditor: Client) -> None:
    ingest("billed", team="platform & co", cost_usd=0.012,
           attempts=[{**make_event()["attempts"][0], "cost_usd": 0.003,
                      "usage": {"input_tokens": 900, "output_tokens": 0}},
                     make_event()["attempts"][1]])
    page = page_of(auditor, "billed")
    assert f'<dt>Team</dt><dd><a href="{reverse("audit:history")}?team=platform+%26+co">platform &amp; co</a>' in page
    assert section(page, "billed") == "Billed by the providers $0.015 · 1900 in · 200 out"


@pytest.mark.django_db
def test_it_names_the_limit_that_refused_the_request(auditor: Client) -> None:
    ingest("refused", team="research", limit="team:tpm", status=429, error_class="limit_exceeded", target=None,
           attempts=[], selection=None)
    text = section(page_of(auditor, "refused"), "limit")
    assert text.startswith("Refused by a limit The team research reached its limit of tokens per minute (team:tpm)")
    assert "with 429 before routing it" in text


@pytest.mark.django_db
def test_it_shows_the_category_route_with_its_rule_trigger_alias_and_target(auditor: Client) -> None:
    ingest("category", **CATEGORY)
    text = section(page_of(auditor, "category"), "category")
    assert "smart → category code → normal" in text
    assert "Rule keywords: a keyword of the category in the latest user message" in text
    assert "What triggered it refactor*" in text


@pytest.mark.django_db
def test_it_shows_the_routing_policy_its_fallback_steps_and_an_unmet_constraint(auditor: Client) -> None:
    ingest("policy", **POLICY)
    text = section(page_of(auditor, "policy"), "policy")
    assert "Policy fast, from the X-Routing-Policy header; in force at the end: cheap (orders by cost)" in text
    assert "Chain walked: fast>cheap" in text
    assert "fast cheap normal-hard max_latency_ms (none is within the latency bound)" in text
    assert "Unmet" not in text

    unmet = {**POLICY["policy_decision"], "unmet": "max_cost_usd=0.01",
             "steps": [{"from": "cheap", "to": "", "virtual_model": "pool", "reason": "max_cost_usd, unavailable"}]}
    ingest("unmet", policy="cheap", policy_chain="cheap", policy_decision=unmet, status=503)
    text = section(page_of(auditor, "unmet"), "policy")
    assert "max_cost_usd (none is within the cost bound); unavailable (none is available)" in text
    assert "Unmet at the end of the chain: max_cost_usd=0.01" in text


@pytest.mark.django_db
def test_it_says_exploration_drew_the_winner_and_that_the_winner_was_in_cold_start(auditor: Client) -> None:
    event = make_event("explored")
    event["selection"].update(explored=True, exploration=0.05, winner="anthropic/claude")
    event["selection"]["candidates"][0].update(observations=1, cold_start=True)
    revisions_ingest(events=[event])
    text = section(page_of(auditor, "explored"), "exploration")
    assert "drawn by exploration, a uniform draw among the healthy targets made for 5% of the picks" in text
    assert "The winner was in cold start (1 observation)" in text

    quiet = make_event("share-only")
    quiet["selection"].update(explored=False, exploration=0.01)
    revisions_ingest(events=[quiet])
    text = section(page_of(auditor, "share-only"), "exploration")
    assert text == ("Exploration share in force: 1% of the picks; this one was not an exploration draw.")


@pytest.mark.django_db
def test_it_names_the_capability_that_escalated_the_tier(auditor: Client) -> None:
    event = make_event("escalated")
    event["tier"].update(escalation="capability", signals=[
        {"name": "capability", "points": 0, "detail": "normal-easy lacks image"}])
    revisions_ingest(events=[event])
    page = page_of(auditor, "escalated")
    assert "could not serve the request (normal-easy lacks image), so it went to <strong>hard</strong>" in page
    assert section(page, "tier-escalation").startswith("escalated: capability")


@pytest.mark.django_db
def test_it_words_a_target_skipped_at_its_providers_limit(auditor: Client) -> None:
    event = make_event("at-limit")
    event["selection"]["skipped"] = [{"target": "openai/gpt-5", "reason": "at_provider_rpm"},
                                     {"target": "google/gemini", "reason": "cooling"}]
    revisions_ingest(events=[event])
    page = page_of(auditor, "at-limit")
    assert ("<span class=\"mono\">openai/gpt-5</span>: at_provider_rpm "
            "(its provider&#x27;s requests-per-minute limit is used up)") in page
    assert "<span class=\"mono\">google/gemini</span>: cooling</li>" in page


# -- history filters and their indexes ----------------------------------------------------------------------


@pytest.fixture
def decided() -> None:
    now = time.time()
    revisions_ingest(events=[
        make_event("plain", created_at=now - 40),
        make_event("code", created_at=now - 30, **CATEGORY),
        make_event("cheap", created_at=now - 20, **POLICY),
        make_event("refused", created_at=now - 10, limit="key:rpm", status=429, attempts=[]),
    ])


@pytest.mark.django_db
def test_the_history_filters_by_category_policy_and_limit(auditor: Client, decided: None) -> None:
    def ids(query: str) -> list[str]:
        return [r.request_id for r in auditor.get(reverse("audit:history") + query).context["rows"]]

    assert ids("?category=code") == ["code"]
    assert ids("?category=math") == []
    assert ids("?policy=cheap") == ["cheap"]
    assert ids("?limit=key:rpm") == ["refused"]
    assert ids("?limit=team:rpm") == []
    assert ids("?category=code&policy=cheap") == []
    page = auditor.get(reverse("audit:history") + "?limit=key:rpm").content.decode()
    assert 'name="limit" value="key:rpm"' in page


def plan(qs: Any) -> str:
    """PostgreSQL's plan for ``qs`` as on a large table (reading the table itself is out of the question)."""
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("SET enable_bitmapscan = off")
        try:
            return str(qs.explain())
        finally:
            cursor.execute("RESET enable_seqscan")
            cursor.execute("RESET enable_bitmapscan")


@pytest.mark.django_db
@pytest.mark.parametrize(("filters", "index"), [
    (HistoryFilters(category="code"), "audit_rev_category_idx"),
    (HistoryFilters(policy="cheap"), "audit_rev_policy_idx"),
    (HistoryFilters(limit="key:rpm"), "audit_rev_limit_refused_idx"),
])
def test_each_filter_reads_its_partial_index_in_page_order(filters: HistoryFilters, index: str) -> None:
    AuditRevision.objects.bulk_create([
        AuditRevision(request_id=uuid.uuid4().hex, created_at=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=i),
                      category="code" if i % 50 == 0 else "", policy="cheap" if i % 70 == 0 else "",
                      limit_refused="key:rpm" if i % 90 == 0 else "")
        for i in range(3000)
    ])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE audit_auditrevision")
    explained = plan(filtered_revisions(filters)[:51])
    assert f"Index Scan using {index}" in explained
    assert "Sort" not in explained  # the index gives the page's order: no sort of every matching row


# -- exports ------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_exports_carry_the_new_columns(auditor: Client, decided: None) -> None:
    response = auditor.get(reverse("audit:export_csv"))
    rows = {r["request_id"]: r for r in csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode()))}
    assert (rows["code"]["category"], rows["code"]["category_rule"], rows["code"]["category_target"]) == (
        "code", "keywords", "normal")
    assert (rows["cheap"]["policy"], rows["cheap"]["policy_chain"]) == ("cheap", "fast>cheap")
    assert rows["refused"]["limit_refused"] == "key:rpm"
    assert rows["plain"]["limit_refused"] == ""

    response = auditor.get(reverse("audit:export_jsonl") + "?policy=cheap")
    [record] = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    assert record["policy_detail"]["steps"][0]["reason"] == "max_latency_ms"
    assert (record["limit_refused"], record["explored"], record["category"]) == ("", False, "")


# -- the event's limit --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "stored"), [
    ("key:rpm", "key:rpm"),
    ("team:budget", "team:budget"),
    ("key:concurrency", "key:concurrency"),
    ("org:daily_tokens", "org:daily_tokens"),  # a scope or limit added later still fits
    ("", ""),
    (None, ""),
    (429, ""),
    (["key:rpm"], ""),
    ({"scope": "key", "limit": "rpm"}, ""),
    ("key:rpm\n", ""),
    ("Key:RPM", ""),
    ("key:rpm; DROP TABLE", ""),
    ("key:" + "r" * 40, ""),
    ("sk-live-0123456789abcdef:rpm", ""),
])
def test_the_events_limit_is_a_limits_name_or_nothing(raw: Any, stored: str) -> None:
    event = prepare_event({**make_event("limit"), "limit": raw}, store_bodies=False, max_bytes=1000)
    assert event["limit"] == stored
    assert prepare_event(event, store_bodies=False, max_bytes=1000)["limit"] == stored  # idempotent


def test_an_event_without_a_limit_gets_an_empty_one() -> None:
    raw = make_event("nolimit")
    raw.pop("limit", None)
    assert prepare_event(raw, store_bodies=False, max_bytes=1000)["limit"] == ""


@pytest.mark.django_db
def test_the_limit_and_the_exploration_become_columns() -> None:
    event = make_event("cols", limit="key:budget")
    event["selection"].update(explored=True, exploration=0.02)
    revisions_ingest(events=[event, make_event("bare", selection=None)])
    row = AuditRevision.objects.get(request_id="cols")
    assert (row.limit_refused, row.explored, row.exploration) == ("key:budget", True, 0.02)
    bare = AuditRevision.objects.get(request_id="bare")
    assert (bare.limit_refused, bare.explored, bare.exploration) == ("", False, None)
