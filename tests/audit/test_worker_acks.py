"""The Celery worker never acknowledges a batch it did not store: a real worker, a RabbitMQ vhost of the test's
own, and a database that refuses the insert for a reason other than a lost connection (a trigger,
tests/audit/refusing.py).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery import Celery

from audit import tasks
from audit.delivery.sinks import CelerySink
from audit.models import AuditRevision, UndeliverableEvent
from tests.audit.events import make_event
from tests.audit.procs import RabbitVhost, Worker, process_env
from tests.audit.refusing import REFUSAL_TEXT, refusing
from tests.audit.test_delivery_faults import test_database_url
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.services]

BATCH = ["keep-1", "refuse-1", "keep-2"]


@pytest.fixture
def rabbit() -> Iterator[RabbitVhost]:
    vhost = RabbitVhost()
    vhost.create()
    yield vhost
    vhost.delete()


@pytest.fixture
def worker(tmp_path: Path, rabbit: RabbitVhost) -> Iterator[Worker]:
    env = process_env(DATABASE_URL=test_database_url(), CELERY_BROKER_URL=rabbit.url,
                      AUDIT_SPOOL_DIR=str(tmp_path / "spool"))
    running = Worker(env, tmp_path / "worker.log")
    running.start()
    yield running
    running.stop()


def send_batch(rabbit: RabbitVhost) -> None:
    """One ingest_events message, published the way the gateway's publisher does (audit.delivery.sinks.CelerySink)."""
    sink = CelerySink(Celery("audit-test", broker=rabbit.url), timeout=10)
    try:
        sink.send([make_event(request_id) for request_id in BATCH])
    finally:
        sink.close()


def messages_in_queue(rabbit: RabbitVhost) -> int:
    """Messages the broker still holds in the task queue, ready or handed out and not yet acknowledged."""
    listed = subprocess.run(["rabbitmqctl", "-q", "list_queues", "-p", rabbit.name, "name", "messages"],
                            check=True, capture_output=True, text=True, timeout=60).stdout
    counts = dict(line.split() for line in listed.splitlines() if line.strip() and not line.startswith("name"))
    return int(counts.get("celery", 0))


def log_count(worker: Worker, text: str) -> int:
    return worker.log_path.read_text(errors="replace").count(text)


def stored() -> set[str]:
    return set(AuditRevision.objects.values_list("request_id", flat=True))


@pytest.mark.django_db(transaction=True)
def test_a_refused_batch_is_retried_then_its_refused_event_kept_aside_and_only_then_acknowledged(
    rabbit: RabbitVhost, worker: Worker,
) -> None:
    with refusing(("audit_auditrevision",), "refuse-"):
        send_batch(rabbit)
        wait_for(lambda: UndeliverableEvent.objects.exists(), 60, "the refused event to be kept aside")
    kept = UndeliverableEvent.objects.get()
    assert kept.request_id == "refuse-1"
    assert REFUSAL_TEXT in kept.error
    assert stored() == {"keep-1", "keep-2"}
    assert log_count(worker, "the database refused a batch of 3 events") == tasks.REFUSED_ATTEMPTS - 1
    wait_for(lambda: messages_in_queue(rabbit) == 0, 30, "the message to be acknowledged once all was stored")


@pytest.mark.django_db(transaction=True)
def test_a_batch_the_database_refuses_entirely_stays_in_the_broker_until_it_can_be_stored(
    rabbit: RabbitVhost, worker: Worker,
) -> None:
    with refusing(("audit_auditrevision", "audit_undeliverableevent"), "refuse-"):
        send_batch(rabbit)
        # The worker gives the batch back to the broker, which hands it out again: twice is proof enough.
        wait_for(lambda: log_count(worker, "was not stored") >= 2, 90, "the batch to be requeued twice")
        assert messages_in_queue(rabbit) == 1  # never acknowledged
        assert not UndeliverableEvent.objects.exists()
    # The database takes it now: the next delivery stores every event and only then acknowledges the message.
    wait_for(lambda: stored() == set(BATCH), 60, "the requeued batch to be stored")
    wait_for(lambda: messages_in_queue(rabbit) == 0, 30, "the message to be acknowledged")
    assert not UndeliverableEvent.objects.exists()
