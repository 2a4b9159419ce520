"""Retention of Idempotency-Key operations and tool-execution ledger entries: expired rows deleted in batches.

Both tables carry ``expires_at`` (Unix time, indexed): settling an operation or an execution sets it to now plus
``GOMODEL_IDEMPOTENCY_RETENTION`` or ``GOMODEL_LEDGER_RETENTION``, and a row past it is never read again (the
transitions in ``routing.core`` treat it as absent). Deleting it changes nothing a client can see; it only keeps
the tables, and the answers stored in them, from growing for ever.

A row is deleted only once its lease has lapsed too. An operation still in flight, or an execution still claimed,
is never purged before its holder's lease ends, whatever the retention: its holder may still report, and a
claim must keep refusing a second executor until then. (A claim's expiry already covers its lease; the purge does
not rely on that alone.)

Each batch is one short ``DELETE`` of at most ``batch_size`` rows by primary key, in its own transaction, so a
large backlog never holds a lock for long. The statement repeats the expiry and lease conditions: a row that a
new request took over meanwhile (under its row lock, with a new expiry) is re-checked by PostgreSQL once that
lock is released, and left alone.
"""

from __future__ import annotations

import time

from django.db import models, transaction

from routing.models import IdempotentOperation, ToolExecution


def purge_expired_operations(*, now: float | None = None, batch_size: int = 1000,
                             max_batches: int | None = None) -> int:
    """Delete Idempotency-Key operations past their expiry and lease; the number deleted (blocking)."""
    return _purge(IdempotentOperation, now=now, batch_size=batch_size, max_batches=max_batches)


def purge_expired_executions(*, now: float | None = None, batch_size: int = 1000,
                             max_batches: int | None = None) -> int:
    """Delete tool-execution ledger entries past their expiry and lease; the number deleted (blocking)."""
    return _purge(ToolExecution, now=now, batch_size=batch_size, max_batches=max_batches)


def _purge(model: type[IdempotentOperation] | type[ToolExecution], *, now: float | None, batch_size: int,
           max_batches: int | None) -> int:
    """Batches of ``model``'s expired rows deleted until none is left or ``max_batches`` ran (None: no bound)."""
    cutoff = time.time() if now is None else now
    expired = models.Q(expires_at__lte=cutoff, lease_until__lte=cutoff)
    size = max(1, batch_size)
    deleted = batches = 0
    while max_batches is None or batches < max_batches:
        ids = list(model._default_manager.filter(expired).order_by("expires_at").values_list("pk", flat=True)[:size])
        if not ids:
            break
        with transaction.atomic():
            count, _ = model._default_manager.filter(expired, pk__in=ids).delete()
        deleted += count
        batches += 1
        if len(ids) < size:
            break
    return deleted
