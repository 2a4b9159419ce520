"""Idempotent operations: a client's Idempotency-Key makes a repeat return the stored accepted answer.

::

    (none) --begin--> IN_FLIGHT --complete--> COMPLETED   (repeat: the stored answer)
                          |------fail------> (forgotten: the client may try again with the same key)
                          |------unknown---> UNKNOWN     (repeat: refused; use a new key)
                          '--lease lapses--> UNKNOWN     (the gateway died mid-request)

A lapsed lease reads as UNKNOWN, but the owner, if it was only slow, may still complete or fail it: a late
truth beats "unknown". A repeat while the first request runs is refused (in flight, 409); the same key with
a different request is refused (mismatch, 422). An ambiguous outcome is UNKNOWN, never "nothing happened".
The transitions are pure, time passed in; ``routing.clients.idempotency_store`` runs them in PostgreSQL.
An entry expires ``ttl_s`` after it settles (``GOMODEL_IDEMPOTENCY_RETENTION``; never before its lease), after
which the key starts a new operation and the purge (``routing.clients.retention``) may delete it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Literal

from routing.core.ledger import LedgerConflict


class OperationState(StrEnum):
    IN_FLIGHT = "in_flight"
    COMPLETED = "completed"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class OperationEntry:
    operation_id: str
    fingerprint: str
    state: OperationState
    owner: str  # the request id working on it
    lease_until: float  # IN_FLIGHT only: after this the owner is presumed dead
    expires_at: float  # the entry is forgotten after this
    answer: bytes | None = None  # COMPLETED: the accepted answer, as returned to the client

    def state_at(self, now: float) -> OperationState:
        """The state as seen at ``now``: an IN_FLIGHT entry whose lease lapsed is UNKNOWN."""
        if self.state is OperationState.IN_FLIGHT and now >= self.lease_until:
            return OperationState.UNKNOWN
        return self.state


BeginKind = Literal["proceed", "replay", "in_flight", "mismatch", "unknown"]


@dataclass(frozen=True, slots=True)
class BeginDecision:
    """``proceed``: generate; ``replay``: return ``entry.answer``; ``in_flight``: 409, the first request
    is still running; ``mismatch``: 422, the key was used for a different request; ``unknown``: 409, an
    earlier attempt may have produced an answer that was never stored (send a new key to generate again).
    """

    kind: BeginKind
    entry: OperationEntry | None = None


def begin_operation(
    entry: OperationEntry | None,
    *,
    operation_id: str,
    fingerprint: str,
    owner: str,
    now: float,
    lease_s: float,
    ttl_s: float,
) -> tuple[BeginDecision, OperationEntry | None]:
    """Decide what a request carrying ``operation_id`` does, and the entry to store (None: unchanged)."""
    if entry is not None and now >= entry.expires_at:
        entry = None
    if entry is None:
        fresh = OperationEntry(
            operation_id,
            fingerprint,
            OperationState.IN_FLIGHT,
            owner,
            now + lease_s,
            now + max(ttl_s, lease_s),
        )
        return BeginDecision("proceed", fresh), fresh
    if entry.fingerprint != fingerprint:
        return BeginDecision("mismatch", entry), None
    state = entry.state_at(now)
    if state is OperationState.COMPLETED:
        return BeginDecision("replay", entry), None
    if state is OperationState.IN_FLIGHT:
        return BeginDecision("in_flight", entry), None
    return BeginDecision("unknown", entry), None


def finish_operation(
    entry: OperationEntry | None,
    *,
    owner: str,
    outcome: Literal["completed", "failed", "unknown"],
    now: float,
    ttl_s: float,
    answer: bytes | None = None,
) -> OperationEntry | None:
    """The entry after its owner finished: COMPLETED with ``answer``, UNKNOWN, or None (forget it).

    A definite failure is forgotten so the client may retry with the same key: nothing was accepted and
    nothing ambiguous happened. Raises LedgerConflict when ``owner`` no longer holds the operation.
    """
    if entry is None or entry.owner != owner or entry.state is not OperationState.IN_FLIGHT:
        raise LedgerConflict("the operation is not in flight for this request", entry)
    if outcome == "failed":
        return None
    if outcome == "completed":
        if answer is None:
            raise ValueError("a completed operation stores its answer")
        return replace(entry, state=OperationState.COMPLETED, answer=answer, expires_at=now + ttl_s)
    return replace(entry, state=OperationState.UNKNOWN, expires_at=now + ttl_s)
