"""The audit rollup: ingestion adds each stored revision once to its minute and hour rows, a redelivered batch adds
nothing, a rebuild recomputes the same sums, and the dashboard's windows and percentiles read them."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from audit import dashboard, services
from audit.models import NO_KEY, RevisionRollup
from audit.rollup import HOUR, MINUTE, bucket_start, latency_slot, rollup_purge, rollup_rebuild
from tests.audit.events import make_event

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 11, 30, 12, 34, 56, tzinfo=dt.UTC)


def at(minutes_ago: float) -> float:
    return (NOW - dt.timedelta(minutes=minutes_ago)).timestamp()


def sums(span: int) -> dict[tuple[object, ...], tuple[int, float, int]]:
    """{(bucket, key_name, team, model, tier, status): (requests, cost, histogram total)} of one span."""
    out = {}
    for row in RevisionRollup.objects.filter(span=span):
        histogram = sum(getattr(row, f"lat_{i:02d}") for i in range(16))
        out[(row.bucket, row.key_name, row.team, row.model, row.tier, row.status)] = (
            row.requests, round(row.cost_usd, 9), histogram)
    return out


def test_it_counts_each_stored_revision_once_in_a_minute_and_an_hour_row() -> None:
    batch = [make_event("a", created_at=at(1)), make_event("b", created_at=at(1.2)),
             make_event("c", created_at=at(90), status=502, team="platform")]
    services.revisions_ingest(events=batch)
    services.revisions_ingest(events=batch)  # a redelivery: nothing new stored, nothing added
    services.revisions_ingest(events=[make_event("a", created_at=at(1)), make_event("d", created_at=at(1))])
    minute = bucket_start(NOW - dt.timedelta(minutes=1), MINUTE)
    assert minute.second == 0
    assert sums(MINUTE)[(minute, "ci-bot", "", "normal", "hard", 200)] == (3, 0.036, 3)
    hours = sums(HOUR)
    assert hours[(bucket_start(NOW, HOUR), "ci-bot", "", "normal", "hard", 200)] == (3, 0.036, 3)
    assert hours[(bucket_start(NOW - dt.timedelta(minutes=90), HOUR), "ci-bot", "platform", "normal", "hard", 502)] \
        == (1, 0.012, 1)


def test_it_counts_what_the_providers_billed_and_a_request_without_a_key() -> None:
    event = make_event("open", created_at=at(1), key_id=None, key_name="")
    event["attempts"][0]["cost_usd"] = 0.5  # a rejected answer was billed too
    event["attempts"][0]["usage"] = {"input_tokens": 10, "output_tokens": 1}
    services.revisions_ingest(events=[event])
    row = RevisionRollup.objects.get(span=MINUTE)
    assert row.key_id == NO_KEY
    assert row.cost_usd == pytest.approx(0.512)


def test_a_rebuild_recomputes_the_sums_ingestion_wrote() -> None:
    services.revisions_ingest(events=[
        make_event(f"r{i}", created_at=at(i * 7), status=200 if i % 3 else 429, latency_ms=float(i * 37))
        for i in range(40)
    ])
    before = {span: sums(span) for span in (MINUTE, HOUR)}
    RevisionRollup.objects.all().delete()
    counted = rollup_rebuild(since=NOW - dt.timedelta(days=1), until=NOW + dt.timedelta(hours=1))
    assert counted == 40
    assert {span: sums(span) for span in (MINUTE, HOUR)} == before
    rollup_rebuild(since=NOW - dt.timedelta(days=1), until=NOW + dt.timedelta(hours=1))  # again: the same
    assert {span: sums(span) for span in (MINUTE, HOUR)} == before


def test_it_purges_minute_rows_after_two_days_and_hour_rows_with_the_revisions() -> None:
    services.revisions_ingest(events=[make_event("old", created_at=at(3 * 24 * 60)),
                                      make_event("new", created_at=at(1))])
    rollup_purge(older_than=NOW - dt.timedelta(days=30), now=NOW)
    assert RevisionRollup.objects.filter(span=MINUTE).count() == 1
    assert RevisionRollup.objects.filter(span=HOUR).count() == 2
    rollup_purge(older_than=NOW - dt.timedelta(days=1), now=NOW)
    assert RevisionRollup.objects.filter(span=HOUR).count() == 1


@pytest.mark.parametrize(("latency", "slot"), [(0.0, 0), (1.0, 0), (1.01, 1), (812.3, 9), (60000.0, 14), (9e9, 15)])
def test_a_latency_falls_in_the_first_bucket_at_least_as_large(latency: float, slot: int) -> None:
    assert latency_slot(latency) == slot


def test_percentiles_interpolate_inside_the_bucket() -> None:
    counts = [0] * 16
    counts[6] = 50  # 50-100 ms
    counts[7] = 50  # 100-200 ms
    assert dashboard.percentile(counts, 0.5) == pytest.approx(100.0)
    assert dashboard.percentile(counts, 0.99) == pytest.approx(198.0)
    assert dashboard.percentile([0] * 16, 0.5) is None


def test_the_dashboard_windows_read_errors_latency_cost_tiers_and_spenders() -> None:
    services.revisions_ingest(events=[
        make_event("ok-1", created_at=at(2), latency_ms=80.0),
        make_event("ok-2", created_at=at(2), latency_ms=150.0, key_id=4, key_name="batch", team="research",
                   cost_usd=1.0, attempts=[]),
        make_event("err", created_at=at(30), status=503, latency_ms=5.0, tier={"tier": "easy"}),
        make_event("older", created_at=at(26 * 60), latency_ms=10.0),
    ])
    hour = dashboard.WINDOWS["hour"]
    slots = dashboard.window_slots(hour, NOW)
    assert len(slots) == 60
    assert slots[-1].start == bucket_start(NOW, MINUTE)
    totals = dashboard.window_totals(slots)
    assert (totals.requests, totals.errors, totals.server_errors) == (3, 1, 1)
    assert totals.cost_usd == pytest.approx(0.012 * 2 + 1.0)
    assert [(s.label, s.requests) for s in dashboard.tier_mix(hour, NOW)] == [("easy", 1), ("hard", 2)]
    spenders = [(s.label, round(s.cost_usd, 3)) for s in dashboard.top_keys(hour, NOW)]
    assert spenders == [("batch", 1.0), ("ci-bot", 0.024)]
    assert [s.label for s in dashboard.top_teams(hour, NOW)] == ["research"]
    day = dashboard.window_totals(dashboard.window_slots(dashboard.WINDOWS["day"], NOW))
    week = dashboard.window_totals(dashboard.window_slots(dashboard.WINDOWS["week"], NOW))
    assert (day.requests, week.requests) == (3, 4)
    assert week.p50_ms == pytest.approx(10.0)  # 5, 10, 80, 150 ms: the second answer's bucket, 5-10 ms


def cached(request_id: str, outcome: str, minutes_ago: float) -> dict[str, object]:
    cache = {"name": "normal", "outcome": outcome, "filled_by": "first" if "hit" in outcome else "",
             "saved_usd": 0.01 if "hit" in outcome else 0.0}
    return make_event(request_id, created_at=at(minutes_ago), cache=cache)


def test_it_counts_exact_and_semantic_hits_and_misses_for_the_cache_hit_rate() -> None:
    services.revisions_ingest(events=[
        cached("h1", "hit", 1), cached("h2", "hit", 2), cached("s1", "semantic-hit", 2), cached("m1", "miss", 3),
        cached("b1", "bypass", 3),  # no lookup: not in the rate
        make_event("plain", created_at=at(3)),  # a name that is not cached
        cached("old", "miss", 26 * 60),
    ])
    hour = dashboard.window_totals(dashboard.window_slots(dashboard.WINDOWS["hour"], NOW))
    assert (hour.cache_hits, hour.cache_semantic_hits, hour.cache_misses) == (2, 1, 1)
    assert hour.cache_lookups == 4
    assert hour.cache_hit_rate == pytest.approx(0.75)
    week = dashboard.window_totals(dashboard.window_slots(dashboard.WINDOWS["week"], NOW))
    assert (week.cache_lookups, week.cache_hit_rate) == (5, pytest.approx(0.6))
    before = [(r.span, r.bucket, r.cache_hits, r.cache_semantic_hits, r.cache_misses)
              for r in RevisionRollup.objects.order_by("span", "bucket", "status")]
    RevisionRollup.objects.all().delete()
    rollup_rebuild(since=NOW - dt.timedelta(days=2), until=NOW + dt.timedelta(hours=1))
    assert [(r.span, r.bucket, r.cache_hits, r.cache_semantic_hits, r.cache_misses)
            for r in RevisionRollup.objects.order_by("span", "bucket", "status")] == before


def test_a_window_without_a_cache_lookup_has_no_cache_hit_rate() -> None:
    services.revisions_ingest(events=[make_event("plain", created_at=at(1)), cached("b1", "bypass", 1)])
    totals = dashboard.window_totals(dashboard.window_slots(dashboard.WINDOWS["hour"], NOW))
    assert totals.requests == 2
    assert (totals.cache_lookups, totals.cache_hit_rate) == (0, None)


SQLITE_CHECK = """
import datetime as dt, json, time
from audit import dashboard, services
from audit.models import RevisionRollup
from tests.audit.events import make_event
now = time.time()
batch = [make_event(f"s{i}", created_at=now - i * 60, status=200 if i else 500,
                    cache={"name": "normal", "outcome": "hit" if i % 2 else "miss"}) for i in range(5)]
services.revisions_ingest(events=batch)
services.revisions_ingest(events=batch)
totals = dashboard.window_totals(dashboard.window_slots(dashboard.WINDOWS["hour"], dt.datetime.now(dt.UTC)))
print(json.dumps([totals.requests, totals.errors, RevisionRollup.objects.filter(span=3600).count() > 0,
                  totals.cache_lookups]))
"""


@pytest.mark.slow
def test_it_rolls_up_the_same_on_sqlite(tmp_path: Path) -> None:
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path}/rollup.sqlite3",
               DJANGO_SETTINGS_MODULE="gomodel_site.settings", AUDIT_SPOOL_DIR=str(tmp_path / "spool"))
    root = Path(__file__).resolve().parents[2]
    for args in (["migrate", "-v0"], ["shell", "-c", SQLITE_CHECK]):
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=root, env=env, capture_output=True, text=True,
                              check=False)
        assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [5, 1, True, 5]
