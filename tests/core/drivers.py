"""Dict-backed drivers for the pure ledger and idempotency transitions, so a test reads as a sequence of calls.

They do what the PostgreSQL stores do around the transitions (read the entry, forget it once expired, apply
the transition, write the result back) and nothing more: the behaviour under test is the transitions'.
"""

from __future__ import annotations

from typing import Literal

from routing.core.idempotency import BeginDecision, OperationEntry, begin_operation, finish_operation
from routing.core.ledger import ClaimDecision, ExecutionEntry, claim_execution, settle_execution


class Ledger:
    def __init__(self, *, ttl_s: float = 3600.0) -> None:
        self.ttl_s = ttl_s
        self.entries: dict[str, ExecutionEntry] = {}

    def get(self, key: str, now: float) -> ExecutionEntry | None:
        entry = self.entries.get(key)
        return None if entry is None or now >= entry.expires_at else entry

    def claim(self, key: str, *, owner: str, now: float, lease_s: float,
              takeover_unknown: bool = False) -> ClaimDecision:
        decision, new = claim_execution(self.get(key, now), key=key, owner=owner, now=now, lease_s=lease_s,
                                        ttl_s=self.ttl_s, takeover_unknown=takeover_unknown)
        if new is not None:
            self.entries[key] = new
        return decision

    def settle(self, key: str, *, owner: str, state: Literal["completed", "failed", "pending", "unknown"],
               now: float, result: str | None = None, error: str | None = None) -> ExecutionEntry:
        entry = settle_execution(self.get(key, now), owner=owner, state=state, now=now, ttl_s=self.ttl_s,
                                 result=result, error=error)
        self.entries[key] = entry
        return entry


class Operations:
    def __init__(self, *, ttl_s: float = 3600.0) -> None:
        self.ttl_s = ttl_s
        self.entries: dict[str, OperationEntry] = {}

    def get(self, operation_id: str, now: float) -> OperationEntry | None:
        entry = self.entries.get(operation_id)
        return None if entry is None or now >= entry.expires_at else entry

    def begin(self, operation_id: str, *, fingerprint: str, owner: str, now: float, lease_s: float) -> BeginDecision:
        decision, new = begin_operation(self.get(operation_id, now), operation_id=operation_id,
                                        fingerprint=fingerprint, owner=owner, now=now, lease_s=lease_s,
                                        ttl_s=self.ttl_s)
        if new is not None:
            self.entries[operation_id] = new
        return decision

    def finish(self, operation_id: str, *, owner: str, outcome: Literal["completed", "failed", "unknown"],
               now: float, answer: bytes | None = None) -> OperationEntry | None:
        entry = finish_operation(self.get(operation_id, now), owner=owner, outcome=outcome, now=now,
                                 ttl_s=self.ttl_s, answer=answer)
        if entry is None:
            self.entries.pop(operation_id, None)
        else:
            self.entries[operation_id] = entry
        return entry
