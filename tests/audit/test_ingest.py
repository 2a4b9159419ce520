"""The worker's insert: idempotent per request_id, attempts linked, bad events kept, DB outages retried."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest
from celery.exceptions import Reject
from django.db import OperationalError

from audit import services, tasks
from audit.delivery.publisher import Publisher
from audit.delivery.sinks import DatabaseSink
from audit.delivery.spool import Spool
from audit.models import AttemptRecord, AuditRevision, UndeliverableEvent
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
    assert old.attempts.count() == 2
    assert new.attempts.count() == 2
    assert AttemptRecord.objects.filter(revision__in=[old, new]).count() == AttemptRecord.objects.count() == 4


@pytest.mark.django_db
def test_it_records_the_verdict_selection_and_outcome_columns() -> None:
    services.revisions_ingest(events=[make_event("r1")])
    r = AuditRevision.objects.get(request_id="r1")
    assert (r.tier, r.score, r.tier_escalated, r.pin_before) == ("hard", 7.0, True, "easy")
    assert [s["name"] for s in r.signals] == ["code", "length"]
    assert (r.strategy, r.winner, r.target, r.status) == ("adaptive", "anthropic/claude", "anthropic/claude", 200)
    assert (r.input_tokens, r.output_tokens, r.cost_usd, r.attempt_count, r.fell_back) == (1000, 200, 0.012, 2, True)
    assert r.prompt_text == ""
    assert len(r.prompt_hash) == 64
    assert "[email]" in r.prompt_preview
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
    assert kept.request_id == "bad"
    assert '"request_id": "bad"' in kept.payload


def test_it_retries_with_capped_backoff_while_the_database_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    failures = iter([True] * 6 + [False])
    sleeps: list[float] = []
    clock = [0.0]

    def flaky_ingest(*, events: list[Any], keep_refused: bool) -> int:
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

    def down(*, events: list[Any], keep_refused: bool) -> int:
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


def _columns(model: type[Any], rows: Any, skip: set[str]) -> list[dict[str, Any]]:
    names = [f.attname for f in model._meta.concrete_fields if f.attname not in skip]
    return [{name: getattr(row, name) for name in names} for row in rows]


@pytest.mark.django_db
def test_the_postgresql_insert_stores_exactly_what_the_orm_insert_stores() -> None:
    from django.db import connection, transaction

    raws = [make_event("x", created_at=1764460000.5), make_event("y", tier=None, selection=None, attempts=[],
                                                                   status="502", error_message="upstream said no")]
    events = [services.prepare_event(e, store_bodies=True, max_bytes=100) for e in raws]
    with transaction.atomic():
        for path, insert in (("pg", services._insert_postgresql), ("orm", services._insert_orm)):
            renamed = [{**e, "request_id": f"{path}-{e['request_id']}"} for e in events]
            insert(connection, {e["request_id"]: e for e in renamed})
    skip = {"id", "request_id", "received_at"}
    for name in ("x", "y"):
        pg = AuditRevision.objects.filter(request_id=f"pg-{name}")
        orm = AuditRevision.objects.filter(request_id=f"orm-{name}")
        assert _columns(AuditRevision, pg, skip) == _columns(AuditRevision, orm, skip)
        assert _columns(AttemptRecord, AttemptRecord.objects.filter(revision__in=pg), {"id", "revision_id"}) == \
            _columns(AttemptRecord, AttemptRecord.objects.filter(revision__in=orm), {"id", "revision_id"})
    assert AttemptRecord.objects.filter(revision__request_id="pg-x").count() == 2
    assert AuditRevision.objects.get(request_id="pg-y").status == 502


@pytest.mark.django_db
def test_a_redelivered_batch_changes_nothing_even_mixed_with_new_events() -> None:
    services.revisions_ingest(events=[make_event("a"), make_event("b", attempts=[])])
    before = _columns(AuditRevision, AuditRevision.objects.order_by("id"), set())
    attempts_before = _columns(AttemptRecord, AttemptRecord.objects.order_by("id"), set())
    changed_copy = make_event("a", status=500, attempts=[])  # a redelivery can never change a stored revision
    services.revisions_ingest(events=[changed_copy, make_event("b", attempts=[]), make_event("c")])
    assert _columns(AuditRevision, AuditRevision.objects.filter(request_id__in=["a", "b"]).order_by("id"),
                    set()) == before
    assert _columns(AttemptRecord, AttemptRecord.objects.filter(revision__request_id="a").order_by("id"),
                    set()) == attempts_before
    assert AttemptRecord.objects.filter(revision__request_id="c").count() == 2


@pytest.mark.django_db
def test_the_publisher_thread_does_not_prepare_its_events_again_but_the_worker_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[Any] = []
    prepare = services.prepare_event

    def counting(raw: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append(raw)
        return prepare(raw, **kwargs)

    monkeypatch.setattr(services, "prepare_event", counting)
    prepared = [prepare(make_event(f"sink-{i}"), store_bodies=False, max_bytes=100) for i in range(3)]
    DatabaseSink().send(prepared)
    assert calls == []
    tasks.ingest_events.run([make_event("task-1"), make_event("task-2")])
    assert len(calls) == 2
    assert AuditRevision.objects.filter(request_id__startswith="sink-").count() == 3
    assert AttemptRecord.objects.filter(revision__request_id__startswith="task-").count() == 4


@pytest.mark.django_db(transaction=True)
def test_a_spooled_batch_is_prepared_again_before_the_database_sink_stores_it(tmp_path: Path) -> None:
    old = Spool(tmp_path)  # what another process, maybe of another version, left: not a prepared batch
    old.append([make_event("spooled-raw", prompt_text="mail bob@example.com", status="503"), "junk"])
    old.close()
    publisher = Publisher(
        sink_factory=DatabaseSink, spool=Spool(tmp_path), batch_size=20, batch_seconds=0.1, max_buffer=1000,
        store_bodies=False, body_max_bytes=1024,
    )
    publisher.start()
    assert publisher.shutdown(10)
    assert list(tmp_path.glob("audit-*.jsonl")) == []
    stored = AuditRevision.objects.get(request_id="spooled-raw")
    assert stored.status == 503
    assert stored.prompt_text == ""
    assert "[email]" in stored.prompt_preview
    assert AuditRevision.objects.filter(validation="malformed_event").count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("store_bodies", [False, True])
def test_a_lone_surrogate_is_stored_as_a_replacement_character(settings: Any, store_bodies: bool) -> None:
    # json.loads lets a client put a lone surrogate in a prompt; no database can store one.
    settings.AUDIT_STORE_BODIES = store_bodies
    services.revisions_ingest(events=[make_event("fine-1"), make_event("surrogate", prompt_text="hi \ud800 there",
                                                                        error_message="bad \udfff"),
                                      make_event("fine-2")])
    assert set(AuditRevision.objects.values_list("request_id", flat=True)) == {"fine-1", "surrogate", "fine-2"}
    stored = AuditRevision.objects.get(request_id="surrogate")
    assert stored.prompt_preview == "hi \ufffd there"
    assert stored.error_message == "bad \ufffd"
    assert stored.prompt_text == ("hi \ufffd there" if store_bodies else "")
    assert not UndeliverableEvent.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("field", ["created_at", "latency_ms", "cost_usd"])
def test_a_number_beyond_range_is_neutralised_not_raised(field: str) -> None:
    raw = make_event(**{field: 10**400})
    event = services.prepare_event(raw, store_bodies=False, max_bytes=100)
    assert services.revisions_ingest(events=[raw]) == 1
    row = AuditRevision.objects.get(request_id=event["request_id"])
    if field == "created_at":
        assert abs(row.created_at.timestamp() - time.time()) < 60  # the time of arrival stands in
    else:
        assert getattr(row, field) in (None, 0.0)


@pytest.mark.django_db
def test_a_date_past_year_9999_is_replaced_by_the_time_of_arrival() -> None:
    raw = make_event(created_at=1e12)
    assert services.revisions_ingest(events=[raw]) == 1
    assert AuditRevision.objects.get(request_id=raw["request_id"]).created_at.year == time.gmtime().tm_year


def test_an_event_without_an_id_and_with_unsortable_keys_still_gets_one() -> None:
    raw = {1: "one", "a": "b", "created_at": 1_700_000_000.0}
    first = services.prepare_event(raw, store_bodies=False, max_bytes=100)
    second = services.prepare_event(dict(raw), store_bodies=False, max_bytes=100)
    assert first["request_id"].startswith("derived-")
    assert first["request_id"] == second["request_id"]
