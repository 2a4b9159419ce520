"""The providers' model calls: the list (``GET .../models``) and one model (``GET .../models/{id}``), as a
gateway's background prober uses them to prove a key and a model without a completion.

=================================================  ===========  =========================================
path                                               format       answer
=================================================  ===========  =========================================
``.../models``                                     OpenAI       the configured models
``/v1/models`` with ``anthropic-version``          Anthropic    the same, Anthropic's page shape
``/v1beta/models``                                 Gemini       the same, Gemini's shape
``/v1/models/{id}`` (``anthropic-version``)        Anthropic    the model, or its 404
``/v1/models/{id}``                                OpenAI       the model, or its 404 (OpenAI's retrieve)
``/v1beta/models/{name}``                          Gemini       the model (models.get), or its 404
=================================================  ===========  =========================================

They behave like the generation endpoints where a prober can tell: a key outside a model's ``api_keys`` is
refused as the format refuses it (the list refuses a key when every model has keys and none is this one), an
unknown model is a 404 under ``strict_models``, and a fault keyed by the model (one model), by the path, or
``"*"`` applies: ``status`` and ``rate_limit`` answer their error, ``connect_refused`` drops the connection,
``timeout``/``slow``/``slow_first_byte`` hold the answer; the other kinds are about completions and do not
apply. Each call is recorded (``wire``, ``path``, ``model`` for one model, ``action`` ``models``).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

from routing.simulator.asgi_io import Connection
from routing.simulator.exchange import JSON_HEADER, _retry_headers
from routing.simulator.faults import Fault
from routing.simulator.recorder import auth_summary, masked_headers, masked_query
from routing.simulator.state import SimulatorState
from routing.simulator.wire.base import (
    INVALID_KEY,
    MISSING_KEY,
    MODEL_NOT_FOUND,
    QUOTA,
    RATE_LIMIT,
    Problem,
    WireFormat,
    case_for_status,
    masked_key,
)

_HOLD_KINDS = {"timeout": "seconds", "slow": "ms", "slow_first_byte": "ms"}
Reply = tuple[int, list[tuple[bytes, bytes]], bytes | None]  # (status, extra headers, body); None: drop it


async def answer_models(conn: Connection, state: SimulatorState, wire: WireFormat, headers: dict[str, str],
                        query: str, model: str | None) -> None:
    """Answer a models list (``model`` None) or one model's lookup, recorded like a generation request."""
    key_header, key = wire.credentials(headers, dict(parse_qsl(query, keep_blank_values=True)))
    behaviour = state.config.behaviour_for(model) if model else None
    known = {k: i for i, k in enumerate(behaviour.api_keys)} if behaviour is not None and behaviour.api_keys else None
    record = state.recorder.open(
        method=conn.scope["method"], path=conn.scope["path"], query=masked_query(query), wire=wire.name,
        model=model, deployment=None, headers=masked_headers(conn.scope["headers"]),
        auth=auth_summary(key_header, key, known), body=None, body_text=None, body_bytes=0, stream=False,
        action="models",
    )
    try:
        status, extra, body = await _reply(conn, state, wire, model, key, record)
        record["status"] = status or None
        if body is None:
            record["outcome"] = "dropped"
            await conn.abort()
        elif conn.disconnected or conn.server_closing:
            record["outcome"] = "disconnected"
        else:
            await conn.respond(status, [JSON_HEADER, *extra], body)
            record["outcome"] = "completed"
    finally:
        state.recorder.close(record, counted_model=None)


async def _reply(conn: Connection, state: SimulatorState, wire: WireFormat, model: str | None, key: str | None,
                 record: dict[str, Any]) -> Reply:
    config = state.config
    if model is not None:
        behaviour = config.behaviour_for(model)
        if behaviour is None:
            return _error(wire, Problem(MODEL_NOT_FOUND, 404, model=model))
        refused = _key_refusal(wire, key, behaviour.api_keys, model)
        if refused is not None:
            return refused
        visible = [(model, behaviour.context_window)]
    else:
        # A key is refused when every model has keys of its own and none is this one; the list is every model.
        every_key = tuple(k for b in config.models.values() for k in b.api_keys)
        open_models = any(not b.api_keys for b in config.models.values())
        refused = _key_refusal(wire, key, () if open_models or not every_key else every_key, "")
        if refused is not None:
            return refused
        visible = [(name, b.context_window) for name, b in config.models.items()]
    fault = state.faults.draw(state.fault_keys(conn.scope["path"], model))
    if fault is not None:
        record["fault"] = fault.kind
        faulted = await _apply_fault(conn, wire, fault, model, key)
        if faulted is not None:
            return faulted
    if model is not None:
        return 200, [], _one_model(wire, *visible[0])
    return 200, [], wire.render_models(visible)


def _key_refusal(wire: WireFormat, key: str | None, accepted: tuple[str, ...], model: str) -> Reply | None:
    if key is None and (wire.requires_key or accepted):
        return _error(wire, Problem(MISSING_KEY, 401, model=model))
    if accepted and key not in accepted:
        return _error(wire, Problem(INVALID_KEY, 401, model=model, key_hint=masked_key(key or "")))
    return None


async def _apply_fault(conn: Connection, wire: WireFormat, fault: Fault, model: str | None,
                       key: str | None) -> Reply | None:
    """The reply a fault makes of a model call; None when it does not apply here (or only delayed it)."""
    message = fault.params.get("message")
    retry_after = fault.params.get("retry_after")
    if retry_after is None and fault.params.get("retry_after_ms") is not None:
        retry_after = fault.params["retry_after_ms"] / 1000.0
    if fault.kind == "rate_limit":
        case = QUOTA if fault.param("insufficient_quota") else RATE_LIMIT
        problem = Problem(case, 429, model=model or "", message=message, retry_after_s=retry_after)
        return _error(wire, problem, list(_retry_headers(fault)))
    if fault.kind == "status":
        status = fault.param("status")
        problem = Problem(case_for_status(status), status, model=model or "", message=message,
                          retry_after_s=retry_after, key_hint=masked_key(key or ""), scripted=True)
        return _error(wire, problem, list(_retry_headers(fault)))
    if fault.kind == "connect_refused":
        return 0, [], None
    if fault.kind in _HOLD_KINDS:
        value = float(fault.param(_HOLD_KINDS[fault.kind]))
        await conn.pause(value if fault.kind == "timeout" else value / 1000.0)
    return None


def _error(wire: WireFormat, problem: Problem, headers: list[tuple[bytes, bytes]] | None = None) -> Reply:
    reply = wire.error(problem)
    return reply.status, headers or [], reply.body


def _one_model(wire: WireFormat, name: str, window: int) -> bytes:
    """One model's description in the format's shape: the only entry of a one-model list."""
    listed: Any = json.loads(wire.render_models([(name, window)]))
    entries = listed.get("models") if "models" in listed else listed.get("data")
    return json.dumps(entries[0], separators=(",", ":")).encode()
