"""Idempotency-Key operations in the database, with the transitions of ``routing.core.idempotency``.

Every worker process (and a restarted gateway) sees the same operations. Only requests that carry an
Idempotency-Key come here; the call runs in a worker thread so the event loop never waits on the database.
A settled operation is kept for ``GOMODEL_IDEMPOTENCY_RETENTION`` and then deleted by the purge
(``routing.clients.retention``).
"""

from __future__ import annotations

import time
from typing import Literal

from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction

from routing.clients.db_thread import in_db_thread
from routing.core.idempotency import (
    BeginDecision,
    OperationEntry,
    OperationState,
    begin_operation,
    finish_operation,
)
from routing.core.ledger import LedgerConflict
from routing.models import IdempotentOperation

# How the owner's attempts ended: what finish_operation turns into the stored state (or forgets).
FinishOutcome = Literal["completed", "failed", "unknown"]


class StoreUnavailable(Exception):
    """The database behind the store did not answer; the caller decides what the client hears."""


def _entry(row: IdempotentOperation | None) -> OperationEntry | None:
    if row is None:
        return None
    return OperationEntry(row.operation_id, row.fingerprint, OperationState(row.state), row.owner,
                          row.lease_until, row.expires_at, bytes(row.answer) if row.answer is not None else None)


def _write(entry: OperationEntry | None, row: IdempotentOperation | None, operation_id: str) -> None:
    if entry is None:
        IdempotentOperation.objects.filter(operation_id=operation_id).delete()
        return
    values = {"fingerprint": entry.fingerprint, "state": str(entry.state), "owner": entry.owner,
              "lease_until": entry.lease_until, "expires_at": entry.expires_at, "answer": entry.answer}
    if row is None:
        IdempotentOperation.objects.create(operation_id=entry.operation_id, **values)
    else:
        IdempotentOperation.objects.filter(pk=row.pk).update(**values)


def _begin(operation_id: str, fingerprint: str, owner: str, lease_s: float) -> BeginDecision:
    for _ in range(2):  # two first requests at once: one inserts, the other re-reads and sees it in flight
        try:
            with transaction.atomic():
                row = IdempotentOperation.objects.select_for_update().filter(operation_id=operation_id).first()
                decision, new = begin_operation(_entry(row), operation_id=operation_id, fingerprint=fingerprint,
                                                owner=owner, now=time.time(), lease_s=lease_s,
                                                ttl_s=settings.GOMODEL_IDEMPOTENCY_RETENTION)
                if new is not None:
                    _write(new, row, operation_id)
                return decision
        except IntegrityError:
            continue
    return BeginDecision("in_flight")


def _finish(operation_id: str, owner: str, outcome: FinishOutcome, answer: bytes | None) -> None:
    with transaction.atomic():
        row = IdempotentOperation.objects.select_for_update().filter(operation_id=operation_id).first()
        try:
            entry = finish_operation(_entry(row), owner=owner, outcome=outcome,
                                     now=time.time(), ttl_s=settings.GOMODEL_IDEMPOTENCY_RETENTION,
                                     answer=answer)
        except LedgerConflict:
            return  # someone else owns it now (our lease lapsed and it was taken over): leave it
        _write(entry, row, operation_id)


async def begin(operation_id: str, *, fingerprint: str, owner: str, lease_s: float) -> BeginDecision:
    try:
        return await in_db_thread(_begin)(operation_id, fingerprint, owner, lease_s)
    except DatabaseError as exc:
        raise StoreUnavailable(type(exc).__name__) from None


async def finish(operation_id: str, *, owner: str, outcome: FinishOutcome, answer: bytes | None = None) -> None:
    await in_db_thread(_finish)(operation_id, owner, outcome, answer)
