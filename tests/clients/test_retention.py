"""Retention of Idempotency-Key operations and tool-execution ledger entries (routing/clients/retention.py), the
beat tasks and the management commands that run it, and the settings that say how long rows live.

Rows are real PostgreSQL rows; the stores and the ledger API write them from worker threads, so the test database
is transactional.
"""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
import threading
import time
import uuid

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection, connections, transaction
from django.test import Client, override_settings

from routing import tasks
from routing.clients import idempotency_store
from routing.clients.retention import purge_expired_executions, purge_expired_operations
from routing.models import IdempotentOperation, ToolExecution
from tests.api.test_ledger_api import keyed_table, post
from tests.gateway_process import ROOT
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

__all__ = ["keyed_table"]  # the ledger API's key snapshot, used by the ledger test below

HOUR = 3600.0


def operation(*, expires_in: float, lease_in: float = -HOUR, state: str = "completed") -> str:
    """An Idempotency-Key operation row expiring ``expires_in`` seconds from now; its id."""
    now = time.time()
    operation_id = f"op_{uuid.uuid4().hex}"
    IdempotentOperation.objects.create(operation_id=operation_id, fingerprint="f" * 64, state=state, owner="req-1",
                                       lease_until=now + lease_in, expires_at=now + expires_in,
                                       answer=b'{"id": "chatcmpl-1"}' if state == "completed" else None)
    return operation_id


def execution(*, expires_in: float, lease_in: float = -HOUR, state: str = "completed") -> str:
    """A ledger row expiring ``expires_in`` seconds from now; its execution key."""
    now = time.time()
    key = f"op_{uuid.uuid4().hex}:send_email:{uuid.uuid4().hex[:12]}"
    ToolExecution.objects.create(key_scope="41", execution_key=key, state=state, owner="executor-1",
                                 lease_until=now + lease_in, expires_at=now + expires_in, attempts=1,
                                 result='{"sent": true}' if state == "completed" else None)
    return key


def operations() -> set[str]:
    return set(IdempotentOperation.objects.values_list("operation_id", flat=True))


def executions() -> set[str]:
    return set(ToolExecution.objects.values_list("execution_key", flat=True))


def test_it_deletes_expired_idempotency_records_and_keeps_live_ones() -> None:
    expired = [operation(expires_in=-60), operation(expires_in=-HOUR, state="unknown")]
    live = operation(expires_in=HOUR)

    assert purge_expired_operations() == 2

    assert operations() == {live}
    assert not set(expired) & operations()


def test_a_request_still_in_flight_keeps_its_operation_until_its_lease_lapses() -> None:
    in_flight = operation(expires_in=-60, lease_in=120, state="in_flight")

    assert purge_expired_operations() == 0
    assert operations() == {in_flight}
    assert purge_expired_operations(now=time.time() + 121) == 1  # the lease has lapsed: the row is fair game
    assert operations() == set()


def test_a_claimed_execution_is_kept_until_its_lease_lapses_and_a_settled_one_goes_at_its_expiry() -> None:
    claimed = execution(expires_in=-60, lease_in=300, state="claimed")
    completed = execution(expires_in=-60)
    failed = execution(expires_in=-1, state="failed")
    live = execution(expires_in=HOUR)

    assert purge_expired_executions() == 2

    assert executions() == {claimed, live}
    assert not {completed, failed} & executions()
    assert purge_expired_executions(now=time.time() + 301) == 1
    assert executions() == {live}


def test_it_deletes_in_batches_and_a_bounded_run_leaves_the_rest_for_the_next() -> None:
    for _ in range(25):
        execution(expires_in=-60)

    assert purge_expired_executions(batch_size=10, max_batches=2) == 20
    assert len(executions()) == 5
    assert purge_expired_executions(batch_size=10) == 5
    assert executions() == set()


def test_a_row_a_new_request_takes_over_while_the_purge_waits_is_not_deleted() -> None:
    """The purge's DELETE repeats its conditions, so a row renewed under a row lock meanwhile is left alone."""
    taken = operation(expires_in=-60)
    holding, renewed = threading.Event(), threading.Event()

    def take_over() -> None:  # what begin() does with an expired operation: lock it, renew it
        try:
            with transaction.atomic():
                row = IdempotentOperation.objects.select_for_update().get(operation_id=taken)
                holding.set()
                renewed.wait(30)
                IdempotentOperation.objects.filter(pk=row.pk).update(expires_at=time.time() + HOUR,
                                                                     lease_until=time.time() + 60, state="in_flight")
        finally:
            connections.close_all()

    purged: list[int] = []

    def purge() -> None:
        try:
            purged.append(purge_expired_operations())
        finally:
            connections.close_all()

    owner = threading.Thread(target=take_over)
    owner.start()
    assert holding.wait(30)
    purger = threading.Thread(target=purge)
    purger.start()
    wait_for(lambda: waiting_on_a_lock() >= 1, 30,
             "the purge to wait on the row lock")  # the purge's DELETE is queued behind the row lock
    renewed.set()
    owner.join(30)
    purger.join(30)

    assert purged == [0]
    assert IdempotentOperation.objects.get(operation_id=taken).state == "in_flight"


def waiting_on_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND wait_event_type = 'Lock' AND query ILIKE 'DELETE%%'")
        (count,) = cursor.fetchone()
    return int(count)


@override_settings(GOMODEL_IDEMPOTENCY_RETENTION=600.0)
def test_a_completed_answer_is_kept_for_the_idempotency_retention() -> None:
    operation_id = f"op_{uuid.uuid4().hex}"
    asyncio.run(idempotency_store.begin(operation_id, fingerprint="fp", owner="req-1", lease_s=30.0))
    asyncio.run(idempotency_store.finish(operation_id, owner="req-1", outcome="completed", answer=b"{}"))

    row = IdempotentOperation.objects.get(operation_id=operation_id)
    assert time.time() < row.expires_at <= time.time() + 600.0


@override_settings(GOMODEL_LEDGER_RETENTION=900.0)
def test_a_ledger_entry_is_kept_for_the_ledger_retention(client: Client) -> None:
    key = f"op_{uuid.uuid4().hex}:send_email:{uuid.uuid4().hex[:12]}"
    assert post(client, "claim", execution_key=key, owner="executor-1", lease_seconds=30).status_code == 200
    done = post(client, "complete", execution_key=key, owner="executor-1", result={"sent": True})
    assert done.status_code == 200, done.content

    row = ToolExecution.objects.get(execution_key=key)
    assert row.state == "completed"
    assert time.time() < row.expires_at <= time.time() + 900.0


def test_the_beat_tasks_purge_both_tables() -> None:
    operation(expires_in=-60)
    execution(expires_in=-60)
    live = execution(expires_in=HOUR)

    assert tasks.purge_expired_operations() == 1
    assert tasks.purge_expired_executions() == 1
    assert (operations(), executions()) == (set(), {live})


def test_the_beat_schedule_runs_both_purges_hourly() -> None:
    schedule = {entry["task"]: entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert schedule["routing.tasks.purge_expired_operations"] == HOUR
    assert schedule["routing.tasks.purge_expired_executions"] == HOUR


def test_the_management_commands_purge_and_say_how_many() -> None:
    operation(expires_in=-60)
    operation(expires_in=-60)
    execution(expires_in=-60)
    out = io.StringIO()

    call_command("purge_idempotency", "--batch-size", "1", stdout=out)
    call_command("purge_ledger", stdout=out)

    lines = out.getvalue().splitlines()
    assert lines == ["deleted 2 idempotency records past their retention (24h)",
                     "deleted 1 ledger entries past their retention (168h)"]
    assert (operations(), executions()) == (set(), set())


@pytest.mark.parametrize(("name", "value"), [("GOMODEL_IDEMPOTENCY_RETENTION", "soon"),
                                           ("GOMODEL_LEDGER_RETENTION", "10s")])
def test_the_settings_refuse_a_bad_retention_naming_the_variable(name: str, value: str) -> None:
    done = subprocess.run([sys.executable, "-c", "import gomodel_site.settings"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={"PATH": os.environ["PATH"], "DJANGO_DEBUG": "true", name: value})
    assert done.returncode != 0
    assert f"{name}: " in done.stderr, done.stderr
