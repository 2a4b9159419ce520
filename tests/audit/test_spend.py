"""Spend per key or team per period: the aggregation (in PostgreSQL, rows inserted directly), the range parsing,
and how an event's team and billed usage become columns."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit import spend, tasks
from audit.filters import MAX_PERIODS, spend_query_from_query
from audit.models import AuditRevision
from audit.spend import OTHER, Group, SpendQuery, Totals, spend_report
from tests.audit.events import make_event

_ids = itertools.count()


def utc(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=dt.UTC)  # type: ignore[misc]


def add(at: dt.datetime, *, key: tuple[int | None, str] = (1, "alpha"), team: str = "", cost: float | None = 0.01,
        tokens: tuple[int, int] = (100, 10), billed: tuple[float | None, int, int] | None = None) -> None:
    """One revision, as the ingestion stores it (billed = the answer's own unless given; None: an old row)."""
    cost_billed, input_billed, output_billed = billed if billed is not None else (cost, *tokens)
    AuditRevision.objects.create(
        request_id=f"spend-{next(_ids)}", created_at=at, key_id=key[0], key_name=key[1], team=team,
        cost_usd=cost, input_tokens=tokens[0], output_tokens=tokens[1], billed_cost_usd=cost_billed,
        billed_input_tokens=input_billed, billed_output_tokens=output_billed,
    )


def query(**overrides: Any) -> SpendQuery:
    values: dict[str, Any] = {"start": utc(2026, 11, 1), "end": utc(2026, 12, 1), "period": "day", "group_by": "key"}
    return SpendQuery(**{**values, **overrides})


def by_start(report: spend.SpendReport) -> dict[dt.date, Totals]:
    return {p.start.date(): p.totals for p in report.periods}


# -- aggregation --------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_it_sums_spend_requests_and_tokens_per_day_and_key() -> None:
    add(utc(2026, 11, 2, 0, 0), key=(1, "alpha"), cost=0.5, tokens=(1000, 100))
    add(utc(2026, 11, 2, 23, 59, 59), key=(1, "alpha"), cost=0.25, tokens=(10, 1))
    add(utc(2026, 11, 3, 12), key=(2, "beta"), cost=2.0, tokens=(5, 5))
    add(utc(2026, 11, 3, 13), key=(2, "beta"), cost=None, tokens=(7, 3))  # an unpriced model

    report = spend_report(query())

    assert report.totals == Totals(requests=4, input_tokens=1022, output_tokens=109, cost_usd=2.75, unpriced=1)
    assert len(report.periods) == 30
    days = by_start(report)
    assert days[dt.date(2026, 11, 2)] == Totals(requests=2, input_tokens=1010, output_tokens=101, cost_usd=0.75)
    assert days[dt.date(2026, 11, 3)] == Totals(requests=2, input_tokens=12, output_tokens=8, cost_usd=2.0,
                                                unpriced=1)
    assert days[dt.date(2026, 11, 4)] == Totals()
    assert [(r.group.label, r.totals.requests, r.totals.cost_usd) for r in report.groups] == [
        ("beta", 2, 2.0), ("alpha", 2, 0.75)]
    assert report.groups[0].share == pytest.approx(2.0 / 2.75)
    assert report.more_groups is None


@pytest.mark.django_db
def test_it_counts_a_range_from_its_first_instant_up_to_but_not_including_its_end() -> None:
    add(utc(2026, 10, 31, 23, 59, 59))
    add(utc(2026, 11, 1))
    add(utc(2026, 11, 30, 23, 59, 59))
    add(utc(2026, 12, 1))
    assert spend_report(query()).totals.requests == 2


@pytest.mark.django_db
def test_it_cuts_weeks_on_monday_and_months_on_the_first_in_utc() -> None:
    add(utc(2026, 11, 1, 23))  # a Sunday
    add(utc(2026, 11, 2, 0, 0, 1))  # the Monday after it
    add(utc(2026, 11, 8, 12))  # the next Sunday
    add(utc(2026, 12, 31, 23, 59))
    add(utc(2027, 1, 1))

    weeks = spend_report(query(period="week", start=utc(2026, 10, 26), end=utc(2026, 11, 16)))
    assert {d: t.requests for d, t in by_start(weeks).items()} == {
        dt.date(2026, 10, 26): 1, dt.date(2026, 11, 2): 2, dt.date(2026, 11, 9): 0}

    months = spend_report(query(period="month", start=utc(2026, 11, 1), end=utc(2027, 2, 1)))
    assert {d: t.requests for d, t in by_start(months).items()} == {
        dt.date(2026, 11, 1): 3, dt.date(2026, 12, 1): 1, dt.date(2027, 1, 1): 1}
    assert [p.end for p in months.periods] == [utc(2026, 12, 1), utc(2027, 1, 1), utc(2027, 2, 1)]


@pytest.mark.django_db
def test_a_period_cut_by_the_range_counts_only_the_part_inside_it() -> None:
    add(utc(2026, 11, 2, 12))  # Monday: before the range
    add(utc(2026, 11, 4, 12))  # Wednesday: inside
    report = spend_report(query(period="week", start=utc(2026, 11, 4), end=utc(2026, 11, 5)))
    assert [(p.start, p.end, p.totals.requests) for p in report.periods] == [(utc(2026, 11, 2), utc(2026, 11, 5), 1)]


@pytest.mark.django_db
def test_the_chart_stacks_the_top_spenders_and_sums_the_rest_as_other() -> None:
    for key_id, cost in ((1, 4.0), (2, 3.0), (3, 2.0), (4, 1.0)):
        add(utc(2026, 11, 5, key_id), key=(key_id, f"k{key_id}"), cost=cost)
    add(utc(2026, 11, 6), key=(3, "k3"), cost=0.5)

    report = spend_report(query(top=2))

    assert [g.key_name for g in report.top] == ["k1", "k2"]
    days = {p.start.date(): p for p in report.periods}
    assert dict(days[dt.date(2026, 11, 5)].by_slot) == {0: 4.0, 1: 3.0, OTHER: 3.0}
    assert dict(days[dt.date(2026, 11, 6)].by_slot) == {OTHER: 0.5}
    for period in report.periods:
        assert sum(period.by_slot.values()) == pytest.approx(period.totals.cost_usd)
    assert [g.group.key_name for g in report.groups] == ["k1", "k2", "k3", "k4"]  # the table lists every key


@pytest.mark.django_db
def test_it_counts_what_was_billed_and_falls_back_to_the_answer_for_rows_stored_before() -> None:
    # A request whose first answer was rejected by validation: both answers were billed.
    add(utc(2026, 11, 5), cost=0.01, tokens=(100, 10), billed=(0.03, 300, 30))
    add(utc(2026, 11, 5), cost=0.02, tokens=(200, 20), billed=(None, None, None))  # stored before billed_*
    add(utc(2026, 11, 5), cost=None, tokens=(50, 5), billed=(None, 50, 5))  # unpriced
    totals = spend_report(query()).totals
    assert totals == Totals(requests=3, input_tokens=550, output_tokens=55, cost_usd=pytest.approx(0.05),
                            unpriced=1)


@pytest.mark.django_db
def test_it_groups_by_team_and_by_key_id_and_name_and_names_the_missing_ones() -> None:
    add(utc(2026, 11, 5), key=(1, "ci"), team="platform", cost=1.0)
    add(utc(2026, 11, 5), key=(2, "web"), team="platform", cost=2.0)
    add(utc(2026, 11, 5), key=(3, "ci"), team="", cost=0.5)  # "ci" deleted and made again: another id
    add(utc(2026, 11, 5), key=(None, ""), team="", cost=0.25)  # open mode: no key

    teams = spend_report(query(group_by="team"))
    assert [(g.group.label, g.totals.cost_usd, g.group.history_filter()) for g in teams.groups] == [
        ("platform", 3.0, {"team": "platform"}), ("(no team)", 0.75, {"team": "-"})]

    keys = spend_report(query())
    assert [(g.group.key_id, g.group.label, g.group.history_filter()) for g in keys.groups] == [
        (2, "web", {"key": "2"}), (1, "ci", {"key": "1"}), (3, "ci", {"key": "3"}), (None, "(no key)", {"key": "-"})]
    assert Group(kind="key", key_id=7).label == "#7"


@pytest.mark.django_db
def test_it_filters_by_key_and_by_team() -> None:
    add(utc(2026, 11, 5), key=(1, "ci"), team="platform", cost=1.0)
    add(utc(2026, 11, 5), key=(2, "web"), team="platform", cost=2.0)
    add(utc(2026, 11, 5), key=(2, "web"), team="", cost=4.0)  # the key left its team
    add(utc(2026, 11, 5), key=(None, ""), team="", cost=8.0)

    def cost(**filters: str) -> float:
        return spend_report(query(**filters)).totals.cost_usd

    assert cost(team="platform") == 3.0
    assert cost(team="-") == 12.0
    assert cost(key="2") == 6.0
    assert cost(key="web") == 6.0
    assert cost(key="-") == 8.0
    assert cost(key="web", team="platform") == 2.0
    assert cost(team="nobody") == 0.0


@pytest.mark.django_db
def test_groups_past_the_table_limit_are_summed_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spend, "MAX_GROUP_ROWS", 2)
    for key_id in range(1, 6):
        add(utc(2026, 11, 5), key=(key_id, f"k{key_id}"), cost=float(key_id))
    report = spend_report(query())
    assert [g.group.key_name for g in report.groups] == ["k5", "k4"]
    assert report.more_groups == Totals(requests=3, input_tokens=300, output_tokens=30, cost_usd=6.0)
    assert report.totals.cost_usd == 15.0


@pytest.mark.django_db
def test_it_aggregates_in_the_database_in_two_grouped_queries() -> None:
    for i in range(50):
        add(utc(2026, 11, 1 + i % 28, i % 24), key=(i % 7, f"k{i % 7}"), team=f"t{i % 3}")
    with CaptureQueriesContext(connection) as queries:
        report = spend_report(query(period="week", top=3))
    sql = [q["sql"] for q in queries.captured_queries]
    assert len(sql) == 2
    assert all("GROUP BY" in s for s in sql)
    assert "DATE_TRUNC('week'" in sql[1]
    assert report.totals.requests == 50


def plan(qs: Any) -> str:
    """PostgreSQL's plan for ``qs`` as on a large table, where reading the table itself, whole or page by page
    (a bitmap scan: the cheapest way to read a table of a few pages), is out of the question."""
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("SET enable_bitmapscan = off")
        try:
            return str(qs.explain())
        finally:
            cursor.execute("RESET enable_seqscan")
            cursor.execute("RESET enable_bitmapscan")


@pytest.mark.django_db(transaction=True)  # VACUUM (which makes index-only scans possible) runs outside one
def test_the_report_reads_only_the_spend_index_and_a_rare_team_or_key_its_own() -> None:
    AuditRevision.objects.bulk_create([
        AuditRevision(request_id=f"bulk-{i}", created_at=utc(2026, 11, 1 + i % 28), key_id=i % 50,
                      key_name=f"k{i % 50}", team=f"t{i % 10}", cost_usd=0.01, billed_cost_usd=0.01)
        for i in range(2000)
    ])
    add(utc(2026, 11, 5), key=(999, "rare"), team="rare-team")
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE audit_auditrevision")
    q = query()
    whole = spend._revisions(q).values("key_id", "key_name").annotate(**spend._aggregates())
    assert "Index Only Scan using audit_rev_spend_idx" in plan(whole)
    per_period = (spend._revisions(q).annotate(bucket=spend.Trunc("created_at", "week", tzinfo=dt.UTC))
                  .values("bucket").annotate(**spend._aggregates()))
    assert "Index Only Scan using audit_rev_spend_idx" in plan(per_period)
    one_team = spend._revisions(query(team="rare-team")).values("key_id").annotate(**spend._aggregates())
    assert "audit_rev_team_idx" in plan(one_team)
    one_key = spend._revisions(query(key="999")).values("team").annotate(**spend._aggregates())
    assert "audit_rev_key_id_idx" in plan(one_key)


# -- the range from the query string ------------------------------------------------------------------------

NOW = utc(2026, 12, 1, 15, 30)  # a Tuesday


@pytest.mark.parametrize(("period", "start"), [
    ("day", utc(2026, 11, 2)),  # 30 days, today included
    ("week", utc(2026, 9, 14)),  # 12 weeks from a Monday, this one included
    ("month", utc(2026, 1, 1)),  # 12 months, this one included
])
def test_the_default_range_is_whole_periods_up_to_today(period: str, start: dt.datetime) -> None:
    parsed, errors = spend_query_from_query({"period": period}, now=NOW)
    assert errors == []
    assert (parsed.start, parsed.end, parsed.period) == (start, utc(2026, 12, 2), period)


def test_from_and_to_are_days_with_both_included() -> None:
    parsed, errors = spend_query_from_query(
        {"from": "2026-11-03", "to": "2026-11-04", "group": "team", "team": " platform ", "key": "7", "top": "3"},
        now=NOW)
    assert errors == []
    assert parsed == SpendQuery(start=utc(2026, 11, 3), end=utc(2026, 11, 5), period="day", group_by="team",
                                key="7", team="platform", top=3)


def test_bad_values_are_named_and_replaced() -> None:
    parsed, errors = spend_query_from_query(
        {"period": "year", "group": "model", "top": "99", "from": "2026-13-01", "to": "soon"}, now=NOW)
    assert (parsed.period, parsed.group_by, parsed.top, parsed.end) == ("day", "key", 8, utc(2026, 12, 2))
    assert [e.split(":")[0] for e in errors] == ["period", "group", "top", "from", "to"]

    swapped, errors = spend_query_from_query({"from": "2026-11-10", "to": "2026-11-01"}, now=NOW)
    assert (swapped.start, swapped.end) == (utc(2026, 11, 1), utc(2026, 11, 11))
    assert errors == ["from: after to; the two were swapped"]


def test_a_range_with_more_periods_than_a_chart_shows_keeps_the_latest() -> None:
    parsed, errors = spend_query_from_query({"from": "1970-01-01", "to": "9998-12-31"}, now=NOW)
    assert spend.period_count(parsed.start, parsed.end, "day") == MAX_PERIODS
    assert parsed.end == utc(9999, 1, 1)
    assert "showing the last 400" in errors[0]
    months, _ = spend_query_from_query({"period": "month", "from": "1970-01-01", "to": "9998-12-31"}, now=NOW)
    assert len(spend.period_starts(months.start, months.end, "month")) == MAX_PERIODS


# -- ingestion ----------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_events_team_becomes_a_column_and_older_events_get_none() -> None:
    tasks.ingest_events.run([make_event("with-team", team="platform"), make_event("without-team"),
                             make_event("odd-team", team={"name": "x"})])
    teams = dict(AuditRevision.objects.values_list("request_id", "team"))
    assert teams == {"with-team": "platform", "without-team": "", "odd-team": "{'name': 'x'}"}
    assert AuditRevision.objects.filter(team="platform").values_list("key_id", "key_name").get() == (3, "ci-bot")


@pytest.mark.django_db
def test_the_billed_columns_sum_every_priced_attempt() -> None:
    rejected = {"attempt_id": "a1", "seq": 1, "target": "openai/gpt-5", "status": 200, "action": "retry_same",
                "validation": "rejected:invalid_json", "usage": {"input_tokens": 900, "output_tokens": 150},
                "cost_usd": 0.009}
    accepted = {"attempt_id": "a2", "seq": 2, "target": "openai/gpt-5", "status": 200, "action": "accepted",
                "validation": "accepted", "usage": {"input_tokens": 1000, "output_tokens": 200}, "cost_usd": 0.012}
    failed = {"attempt_id": "a0", "seq": 1, "status": 429, "action": "fallback", "usage": {}, "cost_usd": None}
    tasks.ingest_events.run([
        make_event("rejected-then-accepted", attempts=[rejected, accepted]),
        make_event("rate-limited-then-accepted", attempts=[failed, accepted]),
        make_event("no-attempts", attempts=[]),
        make_event("unpriced", attempts=[failed, {**accepted, "cost_usd": None}], cost_usd=None),
    ])
    billed = {r.request_id: (r.billed_cost_usd, r.billed_input_tokens, r.billed_output_tokens, r.cost_usd)
              for r in AuditRevision.objects.all()}
    assert billed["rejected-then-accepted"] == (pytest.approx(0.021), 1900, 350, 0.012)
    assert billed["rate-limited-then-accepted"] == (0.012, 1000, 200, 0.012)
    assert billed["no-attempts"] == (0.012, 1000, 200, 0.012)
    assert billed["unpriced"] == (None, 1000, 200, None)


# -- SQLite (the embedded default) --------------------------------------------------------------------------

SQLITE_REPORT = """
import datetime as dt, json
from audit.services import revisions_ingest
from audit.spend import SpendQuery, spend_report
def at(*args):
    return dt.datetime(*args, tzinfo=dt.UTC).timestamp()
revisions_ingest(events=[
    {"request_id": "s1", "created_at": at(2026, 11, 1, 23), "key_id": 1, "key_name": "ci", "team": "platform",
     "cost_usd": 1.0, "usage": {"input_tokens": 10, "output_tokens": 1}, "attempts": []},
    {"request_id": "s2", "created_at": at(2026, 11, 2, 1), "key_id": 2, "key_name": "web", "team": "platform",
     "cost_usd": 2.0, "usage": {"input_tokens": 20, "output_tokens": 2}, "attempts": []},
    {"request_id": "s3", "created_at": at(2026, 11, 20), "key_id": 2, "key_name": "web",
     "cost_usd": None, "usage": {"input_tokens": 30, "output_tokens": 3}, "attempts": []},
])
out = {}
for period in ("day", "week", "month"):
    report = spend_report(SpendQuery(start=dt.datetime(2026, 10, 26, tzinfo=dt.UTC),
                                     end=dt.datetime(2026, 12, 1, tzinfo=dt.UTC), period=period, group_by="team",
                                     top=1))
    out[period] = {
        "totals": [report.totals.requests, report.totals.input_tokens, report.totals.cost_usd, report.totals.unpriced],
        "periods": {p.start.date().isoformat(): [p.totals.requests, dict(p.by_slot)] for p in report.periods
                    if p.totals.requests},
        "groups": [[g.group.label, g.totals.cost_usd] for g in report.groups],
    }
print(json.dumps(out))
"""


@pytest.mark.slow
def test_it_aggregates_the_same_on_sqlite(tmp_path: Path) -> None:
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path}/spend.sqlite3",
               DJANGO_SETTINGS_MODULE="gomodel_site.settings", AUDIT_SPOOL_DIR=str(tmp_path / "spool"))
    root = Path(__file__).resolve().parents[2]
    for args in (["migrate", "-v0"], ["shell", "-c", SQLITE_REPORT]):
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=root, env=env, capture_output=True, text=True,
                              check=False)
        assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    for period in ("day", "week", "month"):
        assert out[period]["totals"] == [3, 60, 3.0, 1]
        assert out[period]["groups"] == [["platform", 3.0], ["(no team)", 0.0]]
    assert out["day"]["periods"] == {"2026-11-01": [1, {"0": 1.0}], "2026-11-02": [1, {"0": 2.0}],
                                     "2026-11-20": [1, {"-1": 0.0}]}
    assert out["week"]["periods"] == {"2026-10-26": [1, {"0": 1.0}], "2026-11-02": [1, {"0": 2.0}],
                                      "2026-11-16": [1, {"-1": 0.0}]}
    assert out["month"]["periods"] == {"2026-11-01": [3, {"0": 3.0, "-1": 0.0}]}
