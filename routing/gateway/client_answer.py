"""Answering the client once an attempt succeeded: the JSON response, the relayed stream, and what every
request ends with (metrics and the audit event).

A stream is committed to once its first frames exist (``attempt.start_stream_attempt``); from then on
its outcome, health update, validation and audit happen in the frame generator's clean-up, which runs when
the stream ends, fails or the client goes away."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from django.http import HttpResponse, StreamingHttpResponse

from routing.clients import idempotency_store, upstream
from routing.core.answer import Answer
from routing.core.compact_json import compact_json
from routing.core.health import TargetHealth
from routing.core.ledger import execution_key
from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.core.reserve import estimate_cut_usage
from routing.core.table import ModelSpec
from routing.core.validate import ValidationRules, validate_answer
from routing.gateway import audit_handoff, cache_fill, governance, stored_responses, tracing
from routing.gateway.attempt import AttemptResult, LiveStream, model_cost, used_tokens
from routing.gateway.bytes_response import BytesResponse
from routing.gateway.planning import TARGET_PIN_NAMESPACE
from routing.gateway.records import AttemptRecord, Call, Journey
from routing.gateway.response_headers import set_headers
from routing.gateway.state import state
from routing.ops import metrics
from routing.providers import MalformedResponse
from routing.providers.anthropic.adapter import dropped_betas_header
from routing.schema.engine import validate_instance

MAX_REPLAY_BYTES = 1024 * 1024  # a streamed answer larger than this is not kept for idempotent repeats
_background: set[asyncio.Task[None]] = set()  # pin writes that need not delay the response


class RelayStream(StreamingHttpResponse):
    """A streamed answer that keeps its frame generator as ``source``, so the relay handler can iterate it
    without Django's per-chunk wrapper and close it the moment the client goes away."""

    def __init__(self, source: AsyncIterator[bytes], **kwargs: Any) -> None:
        super().__init__(source, **kwargs)
        self.source = source

    def _set_streaming_content(self, value: Any) -> None:
        # Django tries iter() first and takes the TypeError as the sign of an async iterator: an exception per
        # stream. The source is always an async generator, and the relay handler closes it itself.
        self._iterator = value
        self.is_async = True


def stored_answer(body: bytes, content_type: str, headers: Mapping[str, str]) -> bytes:
    """What a repeat of an idempotent request gets back: the body and the decision headers."""
    return json.dumps({"body": body.decode(), "content_type": content_type,
                       "headers": {k: v for k, v in headers.items() if k != "X-Request-Id"}}).encode()


def health_view(health: TargetHealth, now: float) -> dict[str, Any]:
    """The target's health after an attempt, as the audit event records it (wall-clock cooldown)."""
    until = health.cooldown_until
    estimate = health.latency_estimate_s
    return {
        "status": health.status(now),
        "latency_ms": None if estimate is None else round(estimate * 1000, 2),
        "in_flight": health.in_flight,
        "cooldown_until": None if until is None else round(time.time() + until - now, 3),
        "consecutive_failures": health.consecutive_failures,
    }


def count_attempt(target: str, outcome: AttemptOutcome) -> None:
    word = "ok" if outcome.ok else outcome.reason
    metrics.ATTEMPTS.labels(target, word).inc()
    estimate = state.health.get(target).latency_estimate_s
    if estimate is not None:
        metrics.ROUTING_LATENCY_ESTIMATE.labels(target).set(estimate)
    metrics.ROUTING_OUTCOMES.labels(target, outcome.result).inc()
    if outcome.error_class is ErrorClass.AMBIGUOUS:
        metrics.AMBIGUOUS.labels(target).inc()


def json_response(
    call: Call, journey: Journey, record: AttemptRecord, model: ModelSpec, result: AttemptResult
) -> HttpResponse:
    journey.answered_by = model
    journey.usage = result.usage
    journey.cost = record.cost
    journey.ttfb_s = result.ttfb_s
    journey.validation = "accepted"
    journey.answer = result.answer
    journey.usage_estimated = result.usage_estimated
    headers = journey.headers(call.request_id)
    headers.update(dropped_betas_header(call.headers, call.table.providers.get(model.provider), call.inbound))
    keys = _execution_keys(journey, result.answer)
    if keys:
        headers["X-GoModel-Execution-Keys"] = json.dumps(keys, separators=(",", ":"))
    body = compact_json(result.client_body)
    response = BytesResponse(body, "application/json", headers)
    if journey.operation_id:
        journey.replay_blob = stored_answer(body, "application/json", headers)
    cache_fill.fill_json(call, journey, result.client_body)
    _after_success(call, journey)
    finish(call, journey)
    return response


def _execution_keys(journey: Journey, answer: Answer | None) -> list[dict[str, str]]:
    if answer is None or not answer.tool_calls:
        return []
    op = journey.operation_id or f"req_{journey.attempts[-1].attempt_id}"
    return [{"tool_call_id": c.id, "name": c.name, "execution_key": execution_key(op, c.name, c.arguments)}
            for c in answer.tool_calls]


def _after_success(call: Call, journey: Journey) -> None:
    """Remember where this session was served (warm prompt cache and session keeping) and keep a Responses answer
    for ``previous_response_id``."""
    stored_responses.remember(call, journey)
    model, session = journey.answered_by, call.detected_session
    if model is None or session is None or journey.plan is None:
        return
    now = time.monotonic()
    settings_ = call.table.settings
    state.warm.put(session.value, model.name, now, settings_.warm_cache_ttl_s)
    for record in journey.plan.records:
        virtual = call.table.virtual_models.get(record.virtual_model)
        if virtual is None or not virtual.session_affinity:
            continue
        served = next((t.name for t in virtual.targets
                       if t.name == model.name or model in call.table.leaf_models(t.name)), None)
        pinned = record.selection.affinity if record.selection else None
        if served is not None and (pinned != "honored" or record.winner != served):
            task = asyncio.get_running_loop().create_task(state.pins.put(
                TARGET_PIN_NAMESPACE, f"{record.virtual_model}|{session.value}", served,
                settings_.smart_routing_session_ttl_s))
            # The loop keeps only weak references to tasks: hold it until it is done.
            _background.add(task)
            task.add_done_callback(_background.discard)


async def stream_response(
    call: Call, journey: Journey, record: AttemptRecord, model: ModelSpec, live: LiveStream,
    rules: ValidationRules, health: TargetHealth, probe: bool,
) -> StreamingHttpResponse:
    """The relayed stream. Its frame generator is started here, before it is handed on, so that however the
    response ends (read to the end, closed by the handler, or dropped unread when the client hung up
    before a frame was sent) the generator's clean-up runs: the provider connection closes, the attempt
    is booked and the audit event goes out."""
    journey.answered_by = model
    journey.ttfb_s = live.ttfb_s
    metrics.TTFT.labels(call.audit_endpoint).observe(live.ttfb_s)  # as the request metrics label it
    headers = journey.headers(call.request_id)
    headers.update(dropped_betas_header(call.headers, call.table.providers.get(model.provider), call.inbound))

    kept: list[bytes] = []  # the stream as sent, for a repeat of an idempotent request or the cache (capped)
    kept_size = [0]
    keeping = bool(journey.operation_id) or cache_fill.keeps_answer(journey)

    overflowed = [False]  # a frame was left out: what was kept is no whole answer

    def remember(frame: bytes) -> bytes:
        if keeping and kept_size[0] + len(frame) <= MAX_REPLAY_BYTES:
            kept.append(frame)
            kept_size[0] += len(frame)
        elif keeping:
            overflowed[0] = True
        return frame

    async def frames() -> AsyncIterator[bytes]:
        translator = live.translator
        outcome: AttemptOutcome | None = None  # a failure; None while the stream goes well
        interrupted = False  # closed by the handler or cancelled: nothing may be awaited for long any more
        booking = _StreamBooking(call, journey, record, model, live, rules, health, probe)
        settle = booking.settle
        try:
            yield b""  # taken by stream_response: the clean-up below is armed from here on
            # The frames of one upstream read go out as one piece: one send to the client per read rather
            # than one per event (an instant provider's whole answer often arrives in a single read).
            if translator.ended:
                settle(None)
            yield remember(b"".join(live.first_frames))
            try:
                feed = translator.feed
                async for chunk in live.chunks:
                    frames_of_read = feed(chunk)
                    if frames_of_read:
                        if booking.settled is None and translator.ended:
                            settle(None)
                        yield remember(b"".join(frames_of_read))
                last_frames = translator.finish()
                if translator.complete:
                    settle(None)
                elif booking.settled is None:
                    outcome, message = _incomplete(live)
                    settle(outcome)
                    last_frames += translator.error_frames("api_error", message)
                if last_frames:
                    yield remember(b"".join(last_frames))
            except Exception as exc:
                outcome = _stream_failure(exc, live)
                if outcome is None:
                    raise
                # After a complete answer the upstream only failed to end its stream cleanly: the client gets
                # the answer's closing frames, not an error.
                closing = (_closing_frames(live) if booking.settled is not None
                           else translator.error_frames("api_error", "The upstream stream failed mid-way."))
                settle(outcome)
                if closing:
                    yield remember(b"".join(closing))
        except (asyncio.CancelledError, GeneratorExit):
            interrupted = True
            outcome = AttemptOutcome.failure(ErrorClass.AMBIGUOUS, "client_disconnected",
                                             latency_s=time.monotonic() - live.started)
            raise
        finally:
            await live.response.aclose()
            final = settle(outcome)
            if interrupted:
                governance.settle_limits_soon(call, journey)  # this task may be cancelled again while it waits
            else:
                await governance.settle_limits(call, journey)
            if journey.operation_id:
                # Bytes reached the client: anything short of a complete stream is an unknown outcome.
                complete = final.ok and kept_size[0] < MAX_REPLAY_BYTES
                blob = stored_answer(b"".join(kept), "text/event-stream", headers) if complete else None
                await idempotency_store.finish(journey.operation_id, owner=call.request_id,
                                               outcome="completed" if complete else "unknown", answer=blob)
            if final.ok and not interrupted and not overflowed[0]:
                cache_fill.fill_stream(call, journey, b"".join(kept))

    source = frames()
    await anext(source)
    response = RelayStream(source, content_type="text/event-stream", status=200)
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    set_headers(response, headers)
    return response


class _StreamBooking:
    """Books a relayed stream's attempt and hands over its audit event, once (``settle``).

    A complete stream is settled before the frames that complete it are sent, so that its audit event is
    journaled (audit/delivery/journal.py) before the client has the whole answer: a gateway killed after that loses no
    revision of it. "Complete" is the upstream's end marker (``translator.ended``: usage and answer are in),
    or the end of the upstream body for a stream that is complete without one. Any other stream is settled
    when it ends, fails or the client goes away."""

    def __init__(self, call: Call, journey: Journey, record: AttemptRecord, model: ModelSpec, live: LiveStream,
                 rules: ValidationRules, health: TargetHealth, probe: bool) -> None:
        self.call, self.journey, self.record, self.model = call, journey, record, model
        self.live, self.rules, self.health, self.probe = live, rules, health, probe
        self.settled: AttemptOutcome | None = None

    def settle(self, failure: AttemptOutcome | None) -> AttemptOutcome:
        """The attempt's outcome, booked and audited on the first call: ``failure``, or success when None."""
        if self.settled is not None:
            return self.settled
        call, journey, record, model, health = self.call, self.journey, self.record, self.model, self.health
        translator = self.live.translator
        now = time.monotonic()
        health.end(now, probe=self.probe)
        usage = translator.usage
        if failure is not None and not translator.ended:
            # Cut short (the client hung up, the upstream failed): the provider's usage never arrived whole, so
            # it is what it did report, or the prompt's estimate, and the output read so far.
            usage = estimate_cut_usage(usage, input_estimate=call.features.estimated_input_tokens,
                                       answer=translator.answer)
            record.usage_estimated = journey.usage_estimated = True
        record.usage = usage
        record.cost = model_cost(model, usage)
        journey.usage, journey.cost = usage, record.cost
        answer = translator.answer
        journey.answer = answer
        if self.live.quota is not None:  # the provider's tpm: the reservation becomes the usage (an estimate if cut)
            state.provider_quotas.settle(self.live.quota,
                                         used_tokens(usage, answer, input_tokens=call.features.estimated_input_tokens))
        if failure is None:
            verdict = validate_answer(answer, self.rules, schema_validator=validate_instance)
            record.validation = journey.validation = "accepted" if verdict.ok else f"rejected:{verdict.reason}"
            result = AttemptOutcome.success(now - self.live.started)
        else:
            result = failure = self.live.blame(failure, now)  # the client's deadline cutting it off is the client's
            record.action = "gave_up"  # bytes already reached the client: nothing may replace them
            if failure.reason != "client_disconnected":
                health.record(failure, now)
            journey.error_class = str(failure.error_class)
            journey.error_message = failure.reason
        record.outcome = result
        record.health = health_view(health, now)
        count_attempt(model.name, result)
        if result.ok:
            _after_success(call, journey)
        finish(call, journey)
        self.settled = result
        return result


def _stream_failure(exc: Exception, live: LiveStream) -> AttemptOutcome | None:
    """The attempt's outcome for an error while relaying; None for an error that is no stream failure (a bug)."""
    latency = time.monotonic() - live.started
    if isinstance(exc, MalformedResponse):
        return AttemptOutcome.failure(ErrorClass.INVALID_RESPONSE, "malformed", latency_s=latency)
    if upstream.is_transport_error(exc):
        return AttemptOutcome.failure(ErrorClass.AMBIGUOUS, "stream_cut", latency_s=latency)
    return None


def _incomplete(live: LiveStream) -> tuple[AttemptOutcome, str]:
    """The outcome of a stream that ended before it was complete, and the message of its error event."""
    failure = live.translator.failure
    latency = time.monotonic() - live.started
    if failure is None:
        return (AttemptOutcome.failure(ErrorClass.AMBIGUOUS, "stream_cut", latency_s=latency),
                "The upstream stream ended before it was complete.")
    return AttemptOutcome.failure(ErrorClass.TRANSIENT, "server_error", latency_s=latency), failure.message


def _closing_frames(live: LiveStream) -> list[bytes]:
    """The closing frames of a complete answer whose upstream stream then failed (none if they cannot be made)."""
    try:
        return live.translator.finish()
    except MalformedResponse:
        return []


def finish(call: Call, journey: Journey) -> None:
    """Metrics and the audit event; neither blocks the event loop."""
    if call.endpoint != "count_tokens":  # a count is advisory and never charged (routing.gateway.count_tokens)
        governance.charge_abandoned(call, journey)
    elapsed = time.monotonic() - call.started
    label = journey.requested_model if call.table.kind_of(journey.requested_model) else "unknown"
    # endpoint: "openai" or "anthropic" for chat (the client's shape), else "embeddings" or "count_tokens"
    metrics.REQUESTS.labels(call.audit_endpoint, label, str(journey.status)).inc()
    metrics.REQUEST_DURATION.labels(call.audit_endpoint).observe(elapsed)
    metrics.ATTEMPTS_PER_REQUEST.observe(len(journey.attempts))
    if journey.answered_by is not None and journey.status == 200:
        metrics.ROUTE_LATENCY.labels(journey.answered_by.name).observe(elapsed)
        if journey.cost is not None:
            metrics.COST.labels(journey.answered_by.name).inc(journey.cost)
            metrics.COST_PER_ANSWER.observe(journey.cost)
    for record in journey.attempts:
        if record.outcome is not None and record.outcome.error_class is not None and record.cost:
            metrics.COST.labels(record.target).inc(record.cost)
    if call.key is not None:
        governance.count_usage(call.key, journey)

    audit_handoff.publish_event(call, journey, elapsed)
    if tracing.active:  # the whole cost of tracing while it is off
        tracing.emit(call, journey, elapsed)
