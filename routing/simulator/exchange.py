"""One generation request from admission to answer: the checks a provider makes, then the fault, then
the answer on its schedule.

A request goes through, in order: the provider's header checks (``anthropic-version``, ``api-version``),
the key check (when the model lists ``api_keys``, or the provider always needs a key), JSON parsing, the
model lookup (``strict_models``), body validation, then the fault draw; a request without a fault whose
prompt exceeds the model's ``context_window`` gets the provider's context error. Only requests that pass
the checks consume a fault's ``times``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from routing.simulator.asgi_io import Connection
from routing.simulator.compose import Reply, compose_reply
from routing.simulator.config import ModelBehaviour
from routing.simulator.delivery import StreamSchedule, deliver_json, deliver_stream
from routing.simulator.faults import ERROR_KINDS, Fault
from routing.simulator.prompt import Prompt
from routing.simulator.state import SimulatorState
from routing.simulator.wire.base import (
    CONTEXT_OVERFLOW,
    INVALID_JSON,
    INVALID_KEY,
    INVALID_REQUEST,
    MISSING_KEY,
    MODEL_NOT_FOUND,
    QUOTA,
    RATE_LIMIT,
    Headers,
    Problem,
    RenderContext,
    RequestError,
    WireFormat,
    case_for_status,
    masked_key,
)

JSON_HEADER = (b"content-type", b"application/json")
REFUSED = "refused"
TIMED_OUT = "timeout"
DISCONNECTED = "disconnected"


@dataclass(slots=True)
class Exchange:
    """A generation request in flight: where it came from, what it asked for, and its record."""

    conn: Connection
    record: dict[str, Any]
    wire: WireFormat
    ctx: RenderContext
    target: str  # the model or deployment name that behaviour, faults and counters go by
    behaviour: ModelBehaviour | None  # None: an unknown model under strict_models
    key: str | None
    known_keys: dict[str, int] | None  # the model's api_keys by position, when it has any


def admit(exchange: Exchange, *, headers: dict[str, str], query: dict[str, str], body: Any, parsed: bool,
          too_large: bool) -> Prompt | Problem:
    """The request as a Prompt, or the Problem the provider would answer it with."""
    wire, target = exchange.wire, exchange.target
    problem = wire.precheck(headers, query, target)
    if problem is None:
        problem = _key_problem(wire, exchange.key, exchange.known_keys, target)
    if problem is not None:
        return problem
    if too_large:
        return Problem(INVALID_REQUEST, 413, model=target, message="Request too large.")
    if not parsed:
        return Problem(INVALID_JSON, 400, model=target)
    if not isinstance(body, dict):
        return Problem(INVALID_REQUEST, 400, model=target, message="The request body must be a JSON object.")
    if exchange.behaviour is None:
        return Problem(MODEL_NOT_FOUND, 404, model=target)
    try:
        return wire.parse(body, exchange.ctx.model)
    except RequestError as exc:
        return Problem(INVALID_REQUEST, 400, model=target, message=exc.message, param=exc.param)


async def refuse(exchange: Exchange, problem: Problem, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    """Answer with the provider's error for ``problem``."""
    reply = exchange.wire.error(problem)
    exchange.record["status"] = reply.status
    exchange.record["error"] = problem.case
    response_headers = [JSON_HEADER, *exchange.wire.response_headers(exchange.ctx),
                        *exchange.wire.error_headers(problem, list(headers))]
    await exchange.conn.respond(reply.status, response_headers, reply.body)


async def answer(exchange: Exchange, state: SimulatorState, prompt: Prompt, fault: Fault | None) -> None:
    """Answer an admitted request: the fault's misbehaviour, or the completion on the model's schedule."""
    conn, record, behaviour = exchange.conn, exchange.record, exchange.behaviour
    assert behaviour is not None
    kind = fault.kind if fault is not None else None
    if fault is not None and kind == "connect_refused":
        await conn.abort(reset=fault.param("reset"))
        record["outcome"] = REFUSED
        return
    if fault is not None and kind == "timeout":
        held = await conn.pause(fault.param("seconds"))
        if held:
            await conn.abort()
        if held or conn.disconnected:
            record["outcome"] = TIMED_OUT if held else DISCONNECTED
        return
    if fault is not None and (kind in ERROR_KINDS or (kind == "stream_error" and not prompt.stream)):
        await refuse(exchange, _fault_problem(exchange, fault, prompt), _retry_headers(fault))
        return
    if prompt.input_tokens > behaviour.context_window:
        problem = Problem(CONTEXT_OVERFLOW, 400, model=exchange.target, tokens=prompt.input_tokens,
                          limit=behaviour.context_window)
        await refuse(exchange, problem)
        return

    explicit_only = exchange.wire.name in ("anthropic", "vertex_anthropic")  # Claude caches only what is marked
    cached, written = state.cached_input(prompt, behaviour, explicit_only=explicit_only)
    reply = compose_reply(prompt, behaviour, counter=state.next_count(exchange.target), fault=fault,
                          cached_tokens=cached, cache_creation_tokens=written)
    _record_usage(record, reply, behaviour)
    record["status"] = 200
    if prompt.stream:
        await _stream(exchange, prompt, reply, fault)
    else:
        extra_s = _extra_delay_s(fault)
        body = exchange.wire.render_json(exchange.ctx, prompt, reply)
        record["outcome"] = await deliver_json(
            conn, 200, [JSON_HEADER, *exchange.wire.response_headers(exchange.ctx)], body,
            delay_s=behaviour.answer_delay_s() + extra_s,
            cut=kind == "stream_cut",
            corrupt=kind == "malformed_json",
        )


async def _stream(exchange: Exchange, prompt: Prompt, reply: Reply, fault: Fault | None) -> None:
    wire, ctx, behaviour = exchange.wire, exchange.ctx, exchange.behaviour
    assert behaviour is not None
    kind = fault.kind if fault is not None else None
    stream = wire.render_stream(ctx, prompt, reply)
    chunks = len(stream.paced)
    interval = behaviour.chunk_interval_s(chunks)
    ttfb = behaviour.ttfb_ms / 1000.0
    extra_s = _extra_delay_s(fault)
    if kind == "slow_first_byte" or (kind == "slow" and chunks <= 1):
        ttfb += extra_s
    elif kind == "slow":
        interval += extra_s / (chunks - 1)
    after_chunks = fault.param("after_chunks") if fault is not None and kind in ("stream_cut", "stream_error") else None
    schedule = StreamSchedule(
        ttfb_s=ttfb,
        interval_s=interval,
        cut_after=after_chunks if kind == "stream_cut" else None,
        error_after=after_chunks if kind == "stream_error" else None,
        error_event=wire.stream_error_after(_fault_problem(exchange, fault, prompt), stream, min(after_chunks, chunks))
        if fault is not None and kind == "stream_error" and after_chunks is not None else b"",
        corrupt=kind == "malformed_json",
    )
    headers = [(b"content-type", wire.stream_content_type), (b"cache-control", b"no-cache"),
               *wire.response_headers(ctx)]
    exchange.record["outcome"] = await deliver_stream(exchange.conn, headers, stream, schedule)


def _extra_delay_s(fault: Fault | None) -> float:
    if fault is not None and fault.kind in ("slow", "slow_first_byte"):
        return float(fault.param("ms")) / 1000.0
    return 0.0


def _key_problem(wire: WireFormat, key: str | None, known_keys: dict[str, int] | None, model: str) -> Problem | None:
    if key is None and (wire.requires_key or known_keys is not None):
        return Problem(MISSING_KEY, 401, model=model)
    if known_keys is not None and key not in known_keys:
        return Problem(INVALID_KEY, 401, model=model, key_hint=masked_key(key or ""))
    return None


def _fault_problem(exchange: Exchange, fault: Fault, prompt: Prompt) -> Problem:
    """The provider error a fault stands for."""
    model = exchange.target
    message = fault.params.get("message")
    retry_after = fault.params.get("retry_after")
    if retry_after is None and fault.params.get("retry_after_ms") is not None:
        retry_after = fault.params["retry_after_ms"] / 1000.0
    if fault.kind == "rate_limit":
        case = QUOTA if fault.param("insufficient_quota") else RATE_LIMIT
        return Problem(case, 429, model=model, message=message, retry_after_s=retry_after)
    if fault.kind == "context_overflow":
        assert exchange.behaviour is not None
        limit = exchange.behaviour.context_window
        return Problem(CONTEXT_OVERFLOW, 400, model=model, tokens=max(prompt.input_tokens, limit + 1), limit=limit)
    status = fault.param("status")
    return Problem(case_for_status(status), status, model=model, message=message, retry_after_s=retry_after,
                   key_hint=masked_key(exchange.key or ""), scripted=True)


def _retry_headers(fault: Fault) -> Headers:
    headers: Headers = []
    retry_after = fault.params.get("retry_after")
    if retry_after is not None:
        headers.append((b"retry-after", str(math.ceil(retry_after)).encode()))
    retry_after_ms = fault.params.get("retry_after_ms")
    if retry_after_ms is not None:
        headers.append((b"retry-after-ms", str(round(retry_after_ms)).encode()))
    return headers


def _record_usage(record: dict[str, Any], reply: Reply, behaviour: ModelBehaviour) -> None:
    usage = reply.usage
    record["usage"] = {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cached_input_tokens": usage.cached_tokens,
        "cache_creation_tokens": usage.cache_creation_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
    }
    record["finish"] = reply.finish
    record["cost_usd"] = behaviour.cost_usd(
        input_tokens=usage.input_tokens, cached_tokens=usage.cached_tokens, output_tokens=usage.output_tokens
    )
