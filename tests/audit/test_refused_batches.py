"""A batch the database refuses (not unreachable: refuses) is retried, then its refused events are kept where an
auditor sees them; if even that is refused, the batch is requeued, never acknowledged as stored.

The refusal is real: a trigger on the test database (tests/audit/refusing.py). The worker and broker version
of the same is in test_worker_acks.py.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from celery.exceptions import Reject

from audit import tasks
from audit.delivery.publisher import Publisher
from audit.delivery.sinks import DatabaseSink
from audit.delivery.spool import Spool
from audit.models import AuditRevision, UndeliverableEvent
from tests.audit.events import make_event
from tests.audit.refusing import REFUSAL_TEXT, refusing
from tests.audit.test_delivery_faults import revisions_table_locked, spooled
from tests.waiting import wait_for

BATCH = ["keep-1", "refuse-1", "keep-2"]


def ingest(sleeps: list[float]) -> int:
    return tasks.ingest_with_retries([make_event(r) for r in BATCH], give_up_after=300, sleep=sleeps.append,
                                     rng=random.Random(3))


@pytest.mark.django_db(transaction=True)
def test_a_refused_batch_is_retried_then_the_refused_event_is_kept_aside(caplog: pytest.LogCaptureFixture) -> None:
    sleeps: list[float] = []
    with refusing(("audit_auditrevision",), "refuse-"):
        assert ingest(sleeps) == 3
    assert len(sleeps) == tasks.REFUSED_ATTEMPTS - 1  # the whole batch was tried three times
    retries = [r for r in caplog.records if "the database refused a batch of 3 events" in r.getMessage()]
    assert len(retries) == tasks.REFUSED_ATTEMPTS - 1
    assert set(AuditRevision.objects.values_list("request_id", flat=True)) == {"keep-1", "keep-2"}
    kept = UndeliverableEvent.objects.get()
    assert kept.request_id == "refuse-1"
    assert REFUSAL_TEXT in kept.error
    assert '"request_id": "refuse-1"' in kept.payload


@pytest.mark.django_db(transaction=True)
def test_a_batch_whose_refused_event_cannot_be_kept_either_is_requeued() -> None:
    sleeps: list[float] = []
    with refusing(("audit_auditrevision", "audit_undeliverableevent"), "refuse-"), \
            pytest.raises(Reject) as rejected:
        ingest(sleeps)
    assert rejected.value.requeue is True
    assert sleeps[-1] == tasks.BACKOFF_CAP_SECONDS  # a pause before the broker hands it out again
    assert not UndeliverableEvent.objects.exists()
    # Once the database takes it, the redelivered batch stores everything (what was stored before, once).
    assert ingest([]) == 3
    assert set(AuditRevision.objects.values_list("request_id", flat=True)) == set(BATCH)


@pytest.mark.django_db(transaction=True)
def test_without_a_broker_a_refused_event_is_kept_aside_at_once(tmp_path: Path) -> None:
    publisher = Publisher(sink_factory=DatabaseSink, spool=Spool(tmp_path), batch_size=3, batch_seconds=0.1,
                          max_buffer=100, store_bodies=False, body_max_bytes=1024)
    with refusing(("audit_auditrevision",), "refuse-"):
        for request_id in BATCH:
            publisher.publish(make_event(request_id))
        assert publisher.shutdown(10)
    assert set(AuditRevision.objects.values_list("request_id", flat=True)) == {"keep-1", "keep-2"}
    assert UndeliverableEvent.objects.get().request_id == "refuse-1"
    assert list(tmp_path.glob("audit-*.jsonl")) == []


@pytest.mark.django_db(transaction=True)
def test_a_hung_database_costs_the_publisher_one_bounded_wait_and_the_batch_is_spooled(tmp_path: Path) -> None:
    def sink() -> Any:
        return DatabaseSink(statement_timeout=0.5)

    publisher = Publisher(sink_factory=sink, spool=Spool(tmp_path), batch_size=5, batch_seconds=0.1,
                          max_buffer=100, store_bodies=False, body_max_bytes=1024)
    with revisions_table_locked():  # every insert waits for this lock
        for i in range(5):
            publisher.publish(make_event(f"hung-{i}"))
        wait_for(lambda: len(spooled(tmp_path, "hung")) == 5, 15, "the batch to be spooled while the table is locked")
    wait_for(lambda: AuditRevision.objects.filter(request_id__startswith="hung-").count() == 5, 30,
             "the spooled batch to be replayed once the lock is gone")
    publisher.shutdown(5)
