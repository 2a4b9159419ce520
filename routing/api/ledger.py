"""The tool-execution ledger over HTTP: claim before running a side effect, then complete or fail it.

    POST /v1/ledger/claim     {"execution_key", "owner", "lease_seconds"?, "takeover_unknown"?}
    POST /v1/ledger/complete  {"execution_key", "owner", "result"}
    POST /v1/ledger/fail      {"execution_key", "owner", "error", "retryable"?}
    POST /v1/ledger/unknown   {"execution_key", "owner", "detail"}
    GET  /v1/ledger/entry/<execution_key>

The rules are ``routing.core.ledger``'s; entries live in the database so that every worker process and
every executor agree. These endpoints are not on the proxy's request path.

Each entry belongs to the caller that created it: the gateway key's id, or ``open`` for requests served
without a key (``GOMODEL_AUTH=open``). Every read and write is filtered by the caller's scope, so another key
can neither read, claim, complete nor fail an entry; the same execution key under another key is another
entry, and nothing in an answer tells whether someone else uses it.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Literal

from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction
from django.http import HttpRequest, HttpResponse, HttpResponseBase

from routing.api import views
from routing.api.gateway_auth import caller_of
from routing.clients.db_thread import in_db_thread
from routing.config.runtime import current_table
from routing.core.ledger import (
    ClaimDecision,
    ExecutionEntry,
    ExecutionState,
    LedgerConflict,
    claim_execution,
    settle_execution,
)
from routing.gateway.gateway_error import GatewayError
from routing.gateway.governance import RequestCount
from routing.models import ToolExecution

_UNAVAILABLE = GatewayError(503, "The ledger's database is not reachable; nothing was recorded. Retry later.",
                            code="ledger_unavailable", headers={"Retry-After": "5"})
DEFAULT_LEASE_S = 300.0
# What a claimant may report: settle_execution's states.
ReportedState = Literal["completed", "failed", "pending", "unknown"]


def _entry(row: ToolExecution | None) -> ExecutionEntry | None:
    if row is None:
        return None
    return ExecutionEntry(key=row.execution_key, state=ExecutionState(row.state), owner=row.owner,
                          lease_until=row.lease_until, expires_at=row.expires_at, attempts=row.attempts,
                          result=row.result, error=row.error)


def _store(entry: ExecutionEntry, row: ToolExecution | None, scope: str) -> None:
    values = {"state": str(entry.state), "owner": entry.owner, "lease_until": entry.lease_until,
              "expires_at": entry.expires_at, "attempts": entry.attempts, "result": entry.result,
              "error": entry.error}
    if row is None:
        ToolExecution.objects.create(key_scope=scope, execution_key=entry.key, **values)
    else:
        ToolExecution.objects.filter(pk=row.pk).update(**values)


def _view(entry: ExecutionEntry, now: float) -> dict[str, Any]:
    return {"execution_key": entry.key, "state": str(entry.state_at(now)), "owner": entry.owner,
            "attempts": entry.attempts, "result": entry.result, "error": entry.error,
            "lease_until": entry.lease_until if entry.state is ExecutionState.CLAIMED else None}


def _claim(scope: str, key: str, owner: str, lease_s: float, takeover: bool) -> tuple[ClaimDecision, float]:
    for _ in range(2):  # a concurrent first claim wins the insert; the loser re-reads under the lock
        try:
            with transaction.atomic():
                row = ToolExecution.objects.select_for_update().filter(key_scope=scope, execution_key=key).first()
                now = time.time()
                decision, new = claim_execution(_entry(row), key=key, owner=owner, now=now, lease_s=lease_s,
                                                ttl_s=settings.GOMODEL_LEDGER_RETENTION, takeover_unknown=takeover)
                if new is not None:
                    _store(new, row, scope)
                return decision, now
        except IntegrityError:
            continue
    raise GatewayError(409, "The execution key is being claimed concurrently; retry.", code="ledger_conflict")


def _settle(scope: str, key: str, owner: str, state: ReportedState, result: str | None,
            error: str | None) -> tuple[ExecutionEntry, float]:
    with transaction.atomic():
        row = ToolExecution.objects.select_for_update().filter(key_scope=scope, execution_key=key).first()
        now = time.time()
        try:
            entry = settle_execution(_entry(row), owner=owner, state=state, now=now,
                                     ttl_s=settings.GOMODEL_LEDGER_RETENTION, result=result, error=error)
        except LedgerConflict as exc:
            raise GatewayError(409, str(exc), code="ledger_conflict") from None
        _store(entry, row, scope)
        return entry, now


def _json(data: dict[str, Any], status: int = 200) -> HttpResponse:
    return HttpResponse(json.dumps(data), content_type="application/json", status=status)


def _field(body: dict[str, Any], name: str, kind: type, *, required: bool = True) -> Any:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise GatewayError(400, f"{name}: expected a {kind.__name__}", param=name, code="invalid_request")
    if isinstance(value, str):
        if not value.strip():
            raise GatewayError(400, f"{name}: must not be empty", param=name, code="invalid_request")
        _storable(value, name)
    return value


def _storable(text: str, name: str) -> str:
    """PostgreSQL text holds neither NUL nor lone surrogates (which JSON allows): the client's 400, not a 503."""
    if "\x00" in text:
        raise GatewayError(400, f"{name}: must not contain NUL characters", param=name, code="invalid_request")
    try:
        text.encode()
    except UnicodeEncodeError:
        raise GatewayError(400, f"{name}: must be valid Unicode (a lone surrogate was sent)", param=name,
                           code="invalid_request") from None
    return text


async def ledger(request: HttpRequest, action: str) -> HttpResponseBase:
    try:
        if request.method != "POST":
            raise GatewayError(405, f"Use POST for /v1/ledger/{action}.", code="method_not_allowed")
        caller = caller_of(request, current_table())
        async with RequestCount(caller.key, uuid.uuid4().hex) as limit_headers:  # a request: no tokens, no spend
            response = await _act(request, action, caller.scope)
    except DatabaseError:
        return views.error_response("openai", _UNAVAILABLE)
    except GatewayError as exc:
        return views.error_response("openai", exc)
    return _with_headers(response, limit_headers)


async def _act(request: HttpRequest, action: str, scope: str) -> HttpResponse:
    body = views._read_json(request)
    key = _field(body, "execution_key", str)
    owner = _field(body, "owner", str)
    if action == "claim":
        lease = body.get("lease_seconds", DEFAULT_LEASE_S)
        if isinstance(lease, bool) or not isinstance(lease, int | float) or not 0 < lease <= 86_400:
            raise GatewayError(400, "lease_seconds: expected a number of seconds up to 86400",
                               param="lease_seconds", code="invalid_request")
        takeover = bool(body.get("takeover_unknown", False))
        decision, now = await in_db_thread(_claim)(scope, key, owner, float(lease), takeover)
        status = 200 if decision.kind == "claimed" else 409
        return _json({"decision": decision.kind, **_view(decision.entry, now)}, status)
    if action == "complete":
        result = body.get("result")
        text = _storable(result, "result") if isinstance(result, str) else json.dumps(result)
        entry, now = await in_db_thread(_settle)(scope, key, owner, "completed", text, None)
    elif action == "fail":
        retryable = bool(body.get("retryable", False))
        error = _field(body, "error", str)
        entry, now = await in_db_thread(_settle)(scope, key, owner, "pending" if retryable else "failed", None,
                                                 error)
    elif action == "unknown":
        detail = _field(body, "detail", str)
        entry, now = await in_db_thread(_settle)(scope, key, owner, "unknown", None, detail)
    else:
        raise GatewayError(404, f"Unknown ledger action `{action}`.", code="unknown_endpoint")
    return _json(_view(entry, now))


async def ledger_get(request: HttpRequest, key: str) -> HttpResponseBase:
    try:
        caller = caller_of(request, current_table())
        _storable(key, "execution_key")
        async with RequestCount(caller.key, uuid.uuid4().hex) as limit_headers:
            scope = caller.scope
            row = await in_db_thread(
                lambda: ToolExecution.objects.filter(key_scope=scope, execution_key=key).first())()
        entry = _entry(row)
        now = time.time()
        if entry is None or now >= entry.expires_at:
            raise GatewayError(404, "No ledger entry for this execution key.", code="not_found",
                               headers=limit_headers)
        response = _json(_view(entry, now))
    except DatabaseError:
        return views.error_response("openai", _UNAVAILABLE)
    except GatewayError as exc:
        return views.error_response("openai", exc)
    return _with_headers(response, limit_headers)


def _with_headers(response: HttpResponse, headers: dict[str, str]) -> HttpResponse:
    for name, value in headers.items():
        response[name] = value
    return response
