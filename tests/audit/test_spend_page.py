"""The spend page and its CSV: auditors only, a chart, totals and tables that link to the filtered history."""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from audit.auditors import AUDITORS_GROUP
from audit.services import revisions_ingest
from tests.audit.events import make_event

pytestmark = pytest.mark.django_db

TODAY = timezone.now().astimezone(dt.UTC).replace(hour=12, minute=0, second=0, microsecond=0)


@pytest.fixture
def auditor(client: Client) -> Client:
    user = User.objects.create_user("audrey", password="x", is_staff=True)
    user.groups.add(Group.objects.get(name=AUDITORS_GROUP))
    client.force_login(user)
    return client


@pytest.fixture
def traffic() -> None:
    """Three keys in two teams and one without, over three days (today, yesterday, the day before)."""
    events = []
    for days_ago, key_id, key_name, team, cost in [
        (0, 1, "ci-bot", "platform", 0.5),
        (0, 2, "web", "platform", 1.25),
        (1, 2, "web", "platform", 1.0),
        (1, 3, "=notebook", "research", 2.0),
        (2, 3, "=notebook", "research", 0.75),
        (2, None, "", "", None),
    ]:
        events.append(make_event(
            created_at=(TODAY - dt.timedelta(days=days_ago)).timestamp(), key_id=key_id, key_name=key_name, team=team,
            cost_usd=cost, attempts=[], usage={"input_tokens": 100, "output_tokens": 10},
        ))
    revisions_ingest(events=events)


def links(page: str, pattern: str) -> list[dict[str, list[str]]]:
    return [parse_qs(urlsplit(href.replace("&amp;", "&")).query) for href in re.findall(pattern, page)]


def test_it_needs_a_login_and_the_view_permission(client: Client, traffic: None) -> None:
    for url in (reverse("audit:spend"), reverse("audit:spend_csv")):
        response = client.get(url)
        assert response.status_code == 302, url
        assert reverse("admin:login") in response["Location"]
    client.force_login(User.objects.create_user("nobody", password="x", is_staff=True))
    assert client.get(reverse("audit:spend")).status_code == 403
    assert client.get(reverse("audit:spend_csv")).status_code == 403


def test_it_is_read_only(auditor: Client) -> None:
    assert auditor.post(reverse("audit:spend")).status_code == 405


def test_it_shows_totals_a_chart_and_each_key_linked_to_its_history(auditor: Client, traffic: None) -> None:
    response = auditor.get(reverse("audit:spend"))
    assert response.status_code == 200
    page = response.content.decode()
    assert 'class="current">Spend</a>' in page  # in the auditor navigation
    assert response.context["report"].totals.requests == 6
    assert '<dd data-total="spend">$5.50</dd>' in page
    assert '<dd data-total="requests">6</dd>' in page
    assert '<dd data-total="input">600</dd>' in page
    assert '<dd data-total="unpriced">1</dd>' in page
    assert '<svg class="chart"' in page
    assert "Spend per day by key" in page
    assert [label for _, label in response.context["legend"]] == ["=notebook", "web", "ci-bot"]

    table = page[page.index('id="spend-by-group"'):page.index('id="spend-by-period"')]
    history = links(table, r'href="(/audit/\?[^"]+)"')
    assert [q["key"] for q in history] == [["3"], ["2"], ["1"], ["-"]]
    assert all(q["since"] and q["until"] for q in history)
    assert "$2.75" in table
    assert "50.0%" in table


def test_the_history_link_of_a_key_lists_exactly_its_requests(auditor: Client, traffic: None) -> None:
    page = auditor.get(reverse("audit:spend") + "?group=team").content.decode()
    table = page[page.index('id="spend-by-group"'):page.index('id="spend-by-period"')]
    hrefs = [h.replace("&amp;", "&") for h in re.findall(r'href="(/audit/\?[^"]+)"', table)]
    counts = {}
    for href in hrefs:
        team = parse_qs(urlsplit(href).query)["team"][0]
        counts[team] = len(auditor.get(href).context["rows"])
    assert counts == {"research": 2, "platform": 3, "-": 1}


def test_switching_the_period_keeps_the_filters_and_groups_by_week_or_month(auditor: Client, traffic: None) -> None:
    page = auditor.get(reverse("audit:spend") + "?team=platform&group=team").content.decode()
    switches = {q["period"][0]: q for q in links(page, r'href="(\?[^"]*period=[^"]+)"')}
    assert set(switches) == {"day", "week", "month"}
    assert switches["month"]["team"] == ["platform"]
    assert "from" not in switches["month"]  # the month view's own default range, not the days shown now

    response = auditor.get(reverse("audit:spend") + "?team=platform&group=team&period=month")
    report = response.context["report"]
    assert len(report.periods) == 12
    assert report.periods[-1].totals.requests + report.periods[-2].totals.requests == 3  # today may be the 1st
    assert report.totals.requests == 3
    assert report.totals.cost_usd == pytest.approx(2.75)
    assert "Spend per month by team" in response.content.decode()


def test_a_range_and_a_key_narrow_the_report(auditor: Client, traffic: None) -> None:
    yesterday = (TODAY - dt.timedelta(days=1)).date().isoformat()
    response = auditor.get(reverse("audit:spend"), {"from": yesterday, "to": yesterday, "key": "web"})
    report = response.context["report"]
    assert len(report.periods) == 1
    assert report.totals.requests == 1
    assert report.totals.cost_usd == 1.0
    assert response.context["errors"] == []


def test_bad_values_show_as_messages_not_errors(auditor: Client, traffic: None) -> None:
    response = auditor.get(reverse("audit:spend"), {"period": "decade", "from": "yesterday", "top": "x"})
    assert response.status_code == 200
    assert len(response.context["errors"]) == 3
    assert "period: one of day, week, month" in response.content.decode()


def test_the_csv_has_one_row_per_period_and_key(auditor: Client, traffic: None) -> None:
    response = auditor.get(reverse("audit:spend_csv"))
    assert response.streaming
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert len(rows) == 6
    today = [r for r in rows if r["period_start"] == TODAY.date().isoformat()]
    assert [(r["key_name"], r["cost_usd"]) for r in today] == [("web", "1.25"), ("ci-bot", "0.5")]
    assert {r["key_name"] for r in rows} >= {"'=notebook"}  # never a spreadsheet formula
    assert sum(float(r["cost_usd"]) for r in rows) == pytest.approx(5.5)

    teams = auditor.get(reverse("audit:spend_csv"), {"group": "team", "period": "month"})
    rows = list(csv.DictReader(io.StringIO(b"".join(teams.streaming_content).decode())))
    assert {"team", "requests", "input_tokens", "output_tokens", "cost_usd", "unpriced_requests"} <= set(rows[0])
    assert sum(int(r["requests"]) for r in rows) == 6


def test_the_history_filters_by_team(auditor: Client, traffic: None) -> None:
    def count(query: str) -> int:
        return len(auditor.get(reverse("audit:history") + query).context["rows"])

    assert count("?team=platform") == 3
    assert count("?team=-") == 1
    assert count("?key=-") == 1
    assert count("?team=research&key=3") == 2
    assert "platform" in auditor.get(reverse("audit:history")).content.decode()
