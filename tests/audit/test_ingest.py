"""The worker's insert: idempotent per request_id, attempts linked, bad events kept, DB outages retried."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from celery.exceptions import Reject
from django.db import OperationalError

from audit import services, tasks
from audit.models import AttemptRecord, AuditRevision, UndeliverableEvent
from audit.publisher import Publisher
from audit.sinks import DatabaseSink
from audit.spool import Spool
from tests.audit.events import make_event


@pytest.mark.django_db
def test_it_stores_the_same_batch_twice_as_one_row_each() -> None:
    batch = [make_event(f"req-{i}") for i in range(5)]
    assert tasks.ingest_events.run(batch) == 5
    assert tasks.ingest_events.run(batch) == 5  # a redelivery
    assert AuditRevision.objects.count() == 5
    assert AttemptRecord.objects.count() == 10
    for revision in AuditRevision.objects.all():
        assert list(revision.attempts.values_list("seq", flat=True).order_by("seq")) == [1, 2]


@pytest.mark.django_db
def test_it_links_attempts_to_revisions_that_already_existed() -> None:
    services.revisions_ingest(events=[make_event("old", attempts=[])])
    services.revisions_ingest(events=[make_event("old"), make_event("new")])
    old = AuditRevision.objects.get(request_id="old")
    new = AuditRevision.objects.get(request_id="new")
    assert old.attempts.count() == 2 and new.attempts.count() == 2
    assert AttemptRecord.objects.filter(revision__in=[old, new]).count() == AttemptRecord.objects.count() == 4


@pytest.mark.django_db
def test_it_records_the_verdict_selection_and_outcome_columns() -> None:
    services.revisions_ingest(events=[make_event("r1")])
    r = AuditRevision.objects.get(request_id="r1")
    assert (r.tier, r.score, r.tier_escalated, r.pin_before) == ("hard", 7.0, True, "easy")
    assert [s["name"] for s in r.signals] == ["code", "length"]
    assert (r.strategy, r.winner, r.target, r.status) == ("adaptive", "anthropic/claude", "anthropic/claude", 200)
    assert (r.input_tokens, r.output_tokens, r.cost_usd, r.attempt_count, r.fell_back) == (1000, 200, 0.012, 2, True)
    assert r.prompt_text == "" and len(r.prompt_hash) == 64 and "[email]" in r.prompt_preview
    first = r.attempts.get(seq=1)
    assert (first.status, first.error_class, first.action, first.health_status) == (429, "transient", "fallback",
                                                                                      "healthy")


@pytest.mark.django_db
def test_one_refused_event_is_kept_aside_and_the_rest_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    prepare = services.prepare_event

    def without_clamping(raw: Any, **kwargs: Any) -> dict[str, Any]:
        event = prepare(raw, **kwargs)
        if event["request_id"] == "bad":
            event["status"] = 2**40  # out of the column's range: the database refuses it
        return event

    monkeypatch.setattr(services, "prepare_event", without_clamping)
    services.revisions_ingest(events=[make_event("good-1"), make_event("bad"), make_event("good-2")])
    assert set(AuditRevision.objects.values_list("request_id", flat=True)) == {"good-1", "good-2"}
    kept = UndeliverableEvent.objects.get()
    assert kept.request_id == "bad" and '"request_id": "bad"' in kept.payload


def test_it_retries_with_capped_backoff_while_the_database_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    failures = iter([True] * 6 + [False])
    sleeps: list[float] = []
    clock = [0.0]

    def flaky_ingest(*, events: list[Any]) -> int:
        if next(failures):
            raise OperationalError("connection refused")
        return len(events)

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock[0] += seconds

    monkeypatch.setattr(tasks, "revisions_ingest", flaky_ingest)
    result = tasks.ingest_with_retries([{}], give_up_after=300, sleep=sleep, clock=lambda: clock[0],
                                       rng=random.Random(7))
    assert result == 1
    assert len(sleeps) == 6
    assert all(0.05 <= s <= tasks.BACKOFF_CAP_SECONDS for s in sleeps)


def test_it_requeues_the_message_when_the_database_stays_down(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]

    def down(*, events: list[Any]) -> int:
        raise OperationalError("connection refused")

    def sleep(seconds: float) -> None:
        clock[0] += seconds

    monkeypatch.setattr(tasks, "revisions_ingest", down)
    with pytest.raises(Reject) as raised:
        tasks.ingest_with_retries([{}], give_up_after=60, sleep=sleep, clock=lambda: clock[0], rng=random.Random(1))
    assert raised.value.requeue is True
    assert 60 <= clock[0] <= 60 + tasks.BACKOFF_CAP_SECONDS


@pytest.mark.django_db(transaction=True)
def test_without_a_broker_the_publisher_thread_writes_to_the_database(tmp_path: Path) -> None:
    publisher = Publisher(
        sink_factory=DatabaseSink, spool=Spool(tmp_path), batch_size=20, batch_seconds=0.1, max_buffer=1000,
        store_bodies=False, body_max_bytes=1024,
    )
    for i in range(45):
        publisher.publish(make_event(f"demo-{i}"))
    assert publisher.shutdown(10)
    assert AuditRevision.objects.count() == 45
    assert list(tmp_path.glob("audit-*.jsonl")) == []
