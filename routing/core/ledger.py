"""The tool-execution ledger: execution keys and pure state transitions.

Retrying a generation and repeating a side effect are separate decisions. Every tool call in an accepted
answer gets an execution key (operation id + tool name + hash of the canonical arguments); a tool executor
claims the key before acting and records the result, so the same side effect never runs twice, even when
the generation was retried, fell back, or the client repeated the request::

    (none) --claim--> CLAIMED --complete--> COMPLETED   (claim: the stored result)
                        |-------fail------> FAILED      (claim: refused, not retryable)
                        |-------fail------> PENDING     (retryable: the next claim may run it)
                        |-------unknown---> UNKNOWN     (claim: refused unless the caller takes over)
                        '--lease lapses---> UNKNOWN     (the executor died mid-action)

An ambiguous outcome is UNKNOWN, never "nothing happened". The transitions are pure functions of
(entry, now) -> entry, so the store runs them inside its own compare-and-set: the ledger API keeps entries in
PostgreSQL (``routing.api.ledger``, a row lock per key). An entry expires ``ttl_s`` after its claim or its
last report (``GOMODEL_LEDGER_RETENTION``; a claim's expiry never comes before its lease), after which a claim
starts afresh and the purge (``routing.clients.retention``) may delete it. Operations (Idempotency-Key) are in
``routing.core.idempotency``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Literal

# --------------------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------------------


def operation_id(idempotency_key: str, key_id: int | str) -> str:
    """The operation id of a client's Idempotency-Key, scoped by the gateway key that sent it.

    Two callers using the same Idempotency-Key never share an operation.
    """
    digest = hashlib.sha256(f"{key_id}\n{idempotency_key}".encode()).hexdigest()
    return f"op_{digest[:32]}"


def attempt_id(operation_or_request_id: str, attempt_no: int) -> str:
    """The id of attempt ``attempt_no`` (1-based) of an operation or request."""
    return f"{operation_or_request_id}.{attempt_no}"


def canonical_json(value: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace, UTF-8 characters kept, no NaN or Infinity.

    Numbers are kept as written by the parser: ``1`` and ``1.0`` are different arguments.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def arguments_hash(arguments_json: str) -> str:
    """sha256 (hex) of the canonical form of a tool call's JSON arguments; ValueError if not JSON."""
    try:
        value = json.loads(arguments_json, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("the arguments are nested too deeply to be JSON") from None
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def execution_key(operation_id: str, tool_name: str, arguments_json: str) -> str:
    """``<operation id>:<tool name>:<sha256 of the canonical arguments>``.

    The same tool called with the same arguments (whatever their key order or spacing) in the same
    operation has the same key, across retries, fallbacks and repeats of the request.
    """
    return f"{operation_id}:{tool_name}:{arguments_hash(arguments_json)}"


def request_fingerprint(canonical_body: str) -> str:
    """sha256 (hex) of a request, to refuse one Idempotency-Key reused for a different request."""
    return hashlib.sha256(canonical_body.encode("utf-8")).hexdigest()


class LedgerConflict(Exception):
    """The transition is not allowed from the entry's current state or by this owner (HTTP 409)."""

    def __init__(self, message: str, entry: Any = None) -> None:
        super().__init__(message)
        self.entry = entry


class ExecutionState(StrEnum):
    PENDING = "pending"  # a retryable failure: the next claim may run it
    CLAIMED = "claimed"
    COMPLETED = "completed"
    FAILED = "failed"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class ExecutionEntry:
    key: str
    state: ExecutionState
    owner: str  # who claimed it last
    lease_until: float  # CLAIMED only
    expires_at: float
    attempts: int = 0  # claims granted so far
    result: str | None = None  # COMPLETED: the executor's result (JSON text, opaque here)
    error: str | None = None  # FAILED / PENDING / UNKNOWN: the executor's last word

    def state_at(self, now: float) -> ExecutionState:
        """The state as seen at ``now``: a CLAIMED entry whose lease lapsed is UNKNOWN."""
        if self.state is ExecutionState.CLAIMED and now >= self.lease_until:
            return ExecutionState.UNKNOWN
        return self.state


ClaimKind = Literal["claimed", "conflict", "completed", "failed", "unknown"]


@dataclass(frozen=True, slots=True)
class ClaimDecision:
    """``claimed``: run the side effect now, then complete or fail; ``conflict``: someone else holds it;
    ``completed``: already done, use ``entry.result``; ``failed``: failed for good; ``unknown``: it may
    have run; check the outside world, then claim again with ``takeover_unknown=True``.
    """

    kind: ClaimKind
    entry: ExecutionEntry


def claim_execution(
    entry: ExecutionEntry | None,
    *,
    key: str,
    owner: str,
    now: float,
    lease_s: float,
    ttl_s: float,
    takeover_unknown: bool = False,
) -> tuple[ClaimDecision, ExecutionEntry | None]:
    """Decide a claim on ``key`` and the entry to store (None: unchanged)."""
    if entry is not None and now >= entry.expires_at:
        entry = None
    state = entry.state_at(now) if entry is not None else None
    if (
        entry is None
        or state is ExecutionState.PENDING
        or (state is ExecutionState.UNKNOWN and takeover_unknown)
    ):
        attempts = entry.attempts + 1 if entry is not None else 1
        claimed = ExecutionEntry(
            key,
            ExecutionState.CLAIMED,
            owner,
            lease_until=now + lease_s,
            expires_at=now + max(ttl_s, lease_s),
            attempts=attempts,
            error=entry.error if entry is not None else None,
        )
        return ClaimDecision("claimed", claimed), claimed
    if state is ExecutionState.CLAIMED:
        return ClaimDecision("conflict", entry), None
    if state is ExecutionState.COMPLETED:
        return ClaimDecision("completed", entry), None
    if state is ExecutionState.FAILED:
        return ClaimDecision("failed", entry), None
    return ClaimDecision("unknown", entry), None


def settle_execution(
    entry: ExecutionEntry | None,
    *,
    owner: str,
    state: Literal["completed", "failed", "pending", "unknown"],
    now: float,
    ttl_s: float,
    result: str | None = None,
    error: str | None = None,
) -> ExecutionEntry:
    """The entry after its claimant reports: COMPLETED with ``result``, FAILED, PENDING (a retryable
    failure) or UNKNOWN. Accepted from the claimant while it holds the claim, also after its lease
    lapsed as long as nobody took over (a late report is the truth we lacked). Repeating the same
    completion is harmless. Raises LedgerConflict otherwise.
    """
    if entry is None or entry.owner != owner:
        raise LedgerConflict("the execution is not claimed by this owner", entry)
    target = ExecutionState(state)
    if (
        entry.state is ExecutionState.COMPLETED
        and target is ExecutionState.COMPLETED
        and entry.result == result
    ):
        return entry
    if entry.state not in (ExecutionState.CLAIMED, ExecutionState.UNKNOWN):
        raise LedgerConflict(f"the execution is already {entry.state}", entry)
    if target is ExecutionState.COMPLETED and result is None:
        raise ValueError("a completed execution stores its result")
    return replace(entry, state=target, result=result, error=error, lease_until=now, expires_at=now + ttl_s)
