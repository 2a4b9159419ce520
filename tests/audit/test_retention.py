"""Retention: revisions older than AUDIT_RETENTION_DAYS go, with their attempts, in bounded batches."""

from __future__ import annotations

import datetime as dt
import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from audit import tasks
from audit.models import AttemptRecord, AuditRevision
from audit.services import revisions_ingest, revisions_purge
from tests.audit.events import make_event

DAY = 86400.0


def _seed(ages_in_days: list[float]) -> None:
    now = time.time()
    revisions_ingest(events=[make_event(f"age-{i}", created_at=now - age * DAY) for i, age in enumerate(ages_in_days)])


@pytest.mark.django_db
def test_the_periodic_task_deletes_revisions_past_retention_with_their_attempts(settings) -> None:  # type: ignore[no-untyped-def]
    settings.AUDIT_RETENTION_DAYS = 30
    _seed([1, 29, 31, 45, 400])
    assert tasks.purge_old_revisions.run() == 3
    assert sorted(AuditRevision.objects.values_list("request_id", flat=True)) == ["age-0", "age-1"]
    assert AttemptRecord.objects.count() == 4


@pytest.mark.django_db
def test_it_deletes_in_bounded_batches() -> None:
    _seed([40] * 7)
    cutoff = timezone.now() - dt.timedelta(days=30)
    assert revisions_purge(older_than=cutoff, batch_size=3, max_batches=2) == 6
    assert AuditRevision.objects.count() == 1
    assert revisions_purge(older_than=cutoff, batch_size=3) == 1


@pytest.mark.django_db
def test_the_management_command_applies_retention_without_beat() -> None:
    _seed([2, 10])
    out = StringIO()
    call_command("purge_audit", "--days", "5", stdout=out)
    assert "deleted 1 audit revisions" in out.getvalue()
    assert list(AuditRevision.objects.values_list("request_id", flat=True)) == ["age-0"]
