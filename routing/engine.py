"""One client request end to end: resolve -> classify -> select -> attempts -> validate -> respond.

Nothing here touches the database: the routing table, health, pins and budgets are in memory (pins in
Redis when configured), the upstream call is the only I/O, and the audit event is handed to a publisher
thread.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpResponse, StreamingHttpResponse

from routing import idempotency_store, metrics
from routing.attempt import (
    AttemptRecord,
    AttemptResult,
    AttemptSpec,
    LiveStream,
    model_cost,
    run_json_attempt,
    start_stream_attempt,
)
from routing.core.answer import Answer, Usage
from routing.core.contracts import EffectiveContract, effective_contract
from routing.core.deadline import AttemptAllowance, Deadline
from routing.core.errors import AttemptOutcome, ErrorClass
from routing.core.features import Features
from routing.core.ledger import execution_key, operation_id
from routing.core.requirements import requirements_from_features
from routing.core.retry import client_status
from routing.core.table import KeySpec, ModelSpec, RoutingTable
from routing.core.validate import ValidationRules, validate_answer
from routing.errors import GatewayError
from routing.planning import TARGET_PIN_NAMESPACE, Plan, PlanInputs, plan_targets
from routing.providers import TranslationError, client_wants_usage, get_adapter
from routing.providers.errors import Inbound
from routing.schemacheck import schema_problems, validate_instance
from routing.state import state
from routing.tiers import TierDecision, decide_tier
from routing.validators_registry import resolve_validator

_background: set[asyncio.Task[None]] = set()  # pin writes that need not delay the response
MAX_REPLAY_BYTES = 1024 * 1024  # a streamed answer larger than this is not kept for idempotent repeats


@dataclass
class Call:
    """One client request as the engine sees it."""

    request_id: str
    inbound: Inbound
    key: KeySpec | None
    body: dict[str, Any]
    features: Features
    headers: Mapping[str, str]  # lower-case names
    table: RoutingTable
    started: float = field(default_factory=time.monotonic)
    started_unix: float = field(default_factory=time.time)
    session: Any = None  # routing.core.sessions.SessionId, detected once when first needed

    @property
    def key_scope(self) -> int | str:
        return self.key.id if self.key is not None else "open"


@dataclass
class Journey:
    """Everything decided for one request; feeds the headers, the metrics and the audit event."""

    requested_model: str
    endpoint: str
    tier: TierDecision | None = None
    target_name: str = ""
    contract: EffectiveContract | None = None
    plan: Plan | None = None
    attempts: list[AttemptRecord] = field(default_factory=list)
    answered_by: ModelSpec | None = None
    usage: Usage | None = None
    cost: float | None = None
    ttfb_s: float | None = None
    status: int = 200
    error_class: str | None = None
    error_message: str | None = None
    validation: str = "not_run"
    answer: Answer | None = None
    deadline_ms: int | None = None
    operation_id: str | None = None
    replay_blob: bytes | None = None  # what a repeat of this idempotent request gets back

    def headers(self, request_id: str) -> dict[str, str]:
        out = {"X-Request-Id": request_id}
        if self.tier is not None:
            out["X-GoModel-Pro-Tier"] = self.tier.tier
            out["X-GoModel-Pro-Tier-Target"] = self.tier.target
            out["X-GoModel-Pro-Tier-Score"] = str(self.tier.score)
        if self.answered_by is not None:
            out["X-GoModel-Target"] = self.answered_by.name
        out["X-GoModel-Attempts"] = str(len(self.attempts))
        if self.cost is not None:
            out["X-GoModel-Cost-Usd"] = f"{self.cost:.8f}"
        if self.operation_id:
            out["X-GoModel-Operation-Id"] = self.operation_id
        return out


class RelayStream(StreamingHttpResponse):
    """A streamed answer that keeps its frame generator as ``source``, so the relay handler can iterate it
    without Django's per-chunk wrapper and close it the moment the client goes away."""

    def __init__(self, source: AsyncIterator[bytes], **kwargs: Any) -> None:
        super().__init__(source, **kwargs)
        self.source = source


async def handle(call: Call) -> HttpResponse | StreamingHttpResponse:
    """Serve one proxied request; GatewayError for anything the client should hear about as an error."""
    requested = call.features.model
    state.follow(call.table)
    journey = Journey(requested_model=requested, endpoint=call.inbound)
    try:
        response = await _route(call, journey)
    except GatewayError as exc:
        journey.status = exc.status
        journey.error_class = journey.error_class or exc.error_class
        journey.error_message = exc.message
        exc.headers = {**journey.headers(call.request_id), **exc.headers}
        _finish(call, journey)
        raise
    return response


async def _route(call: Call, journey: Journey) -> HttpResponse | StreamingHttpResponse:
    table = call.table
    requested = journey.requested_model
    kind = table.kind_of(requested)
    if kind is None:
        raise GatewayError(404, f"The model `{requested}` does not exist or you do not have access to it.",
                           code="model_not_found", param="model", error_class="permanent")
    key = call.key
    if key is not None and key.allowed_models and requested not in key.allowed_models:
        raise GatewayError(403, f"This key is not allowed to use the model `{requested}`.",
                           code="model_not_allowed", param="model", error_class="permanent")

    target = requested
    contract_name: str | None = None
    if kind == "tier":
        route = table.tier_routes[requested]
        journey.tier = await decide_tier(call, route)
        target = journey.tier.target
        contract_name = route.contract
    journey.target_name = target
    if contract_name is None and target in table.virtual_models:
        contract_name = table.virtual_models[target].contract

    workload = call.headers.get("x-gomodel-workload", "").strip()
    if workload:
        spec = table.contracts.get(workload)
        if spec is None:
            raise GatewayError(400, f"Unknown workload `{workload}` in X-GoModel-Workload.",
                               code="unknown_workload", param="X-GoModel-Workload", error_class="permanent")
    else:
        spec = table.contracts.get(contract_name) if contract_name else None
    contract = effective_contract(requirements_from_features(call.features), spec)
    journey.contract = contract
    if call.features.output_schema is not None:
        problems = schema_problems(call.features.output_schema)
        if problems:
            raise GatewayError(400, f"The JSON schema of the response format is invalid: {problems[0]}",
                               param="response_format", error_class="permanent")

    deadline = _deadline(call, contract)
    journey.deadline_ms = round((deadline.at - call.started) * 1000)

    idempotency_key = call.headers.get("idempotency-key", "").strip()
    if idempotency_key:
        journey.operation_id = operation_id(idempotency_key, call.key_scope)
        replay = await _idempotency_begin(call, journey, deadline)
        if replay is not None:
            return replay

    plan = await _plan(call, journey, target, contract)
    journey.plan = plan
    if not plan.models:
        _no_candidates(plan, target)
    try:
        response = await _attempts(call, journey, plan, contract, deadline)
    except BaseException:
        if journey.operation_id:
            # An ambiguous attempt may have run: never record "nothing happened" for it.
            outcome = "unknown" if journey.error_class == ErrorClass.AMBIGUOUS else "failed"
            await idempotency_store.finish(journey.operation_id, owner=call.request_id, outcome=outcome)
        raise
    if journey.operation_id and journey.replay_blob is not None:
        await idempotency_store.finish(journey.operation_id, owner=call.request_id, outcome="completed",
                                       answer=journey.replay_blob)
    return response


def _deadline(call: Call, contract: EffectiveContract) -> Deadline:
    from routing.core.deadline import DeadlineHeaderError

    try:
        return Deadline.start(
            call.started,
            header=call.headers.get("x-gomodel-deadline-ms"),
            contract_ms=contract.deadline_ms,
            default_ms=settings.GOMODEL_DEFAULT_DEADLINE_MS,
        )
    except DeadlineHeaderError as exc:
        raise GatewayError(400, str(exc), param="X-GoModel-Deadline-Ms", error_class="permanent") from None


async def _idempotency_begin(call: Call, journey: Journey, deadline: Deadline) -> HttpResponse | None:
    from routing.core.ledger import canonical_json, request_fingerprint

    assert journey.operation_id is not None
    fingerprint = request_fingerprint(canonical_json({"path": call.inbound, "body": call.body}))
    remaining = deadline.remaining(time.monotonic())
    try:
        decision = await idempotency_store.begin(journey.operation_id, fingerprint=fingerprint,
                                                 owner=call.request_id, lease_s=remaining + 30.0)
    except DatabaseError:
        raise GatewayError(503, "Idempotency-Key requests need the database, which is not reachable; retry "
                                "later or send the request without the header.", code="idempotency_unavailable",
                           headers={"Retry-After": "5"}, error_class="transient") from None
    if decision.kind == "proceed":
        return None
    if decision.kind == "replay" and decision.entry is not None and decision.entry.answer is not None:
        stored = json.loads(decision.entry.answer)
        response = HttpResponse(stored["body"].encode(), content_type=stored["content_type"], status=200)
        for name, value in stored["headers"].items():
            response[name] = value
        response["X-Request-Id"] = call.request_id
        response["X-GoModel-Idempotent-Replay"] = "true"
        journey.operation_id = None  # this request only replays; it owns nothing
        return response
    journey.operation_id = None
    if decision.kind == "mismatch":
        raise GatewayError(422, "This Idempotency-Key was already used for a different request.",
                           code="idempotency_key_reused", param="Idempotency-Key", error_class="permanent")
    if decision.kind == "unknown":
        raise GatewayError(409, "The first request with this Idempotency-Key ended with an unknown outcome "
                                "(the provider may have executed it); use a new key to run it again.",
                           code="idempotency_outcome_unknown", error_class="permanent")
    raise GatewayError(409, "A request with this Idempotency-Key is still in progress.",
                       code="idempotency_key_in_use", headers={"Retry-After": "1"}, error_class="permanent")


def stored_answer(body: bytes, content_type: str, headers: Mapping[str, str]) -> bytes:
    """What a repeat of an idempotent request gets back: the body and the decision headers."""
    return json.dumps({"body": body.decode(), "content_type": content_type,
                       "headers": {k: v for k, v in headers.items() if k != "X-Request-Id"}}).encode()


async def _plan(call: Call, journey: Journey, target: str, contract: EffectiveContract) -> Plan:
    table = call.table
    session_targets: dict[str, str] = {}
    warm: str | None = None
    below = _virtual_models_below(target, table)
    affine = [name for name in below if table.virtual_models[name].session_affinity]
    # Session keeping and the warm-cache bonus only matter when there is a choice to make: a request for a
    # concrete model skips session detection altogether.
    if below:
        session = session_of(call)
        now = time.monotonic()
        warm = state.warm.get(session.value, now)
        for name in affine:
            pinned = await state.pins.get(TARGET_PIN_NAMESPACE, f"{name}|{session.value}")
            if pinned:
                session_targets[name] = pinned
    inputs = PlanInputs(table=table, contract=contract, session_targets=session_targets, warm_target=warm,
                        now=time.monotonic())
    plan = plan_targets(target, inputs, state)
    for record in plan.records:
        if record.winner:
            metrics.ROUTING_SELECTIONS.labels(record.virtual_model, record.strategy, record.winner).inc()
        for _name, reason in record.skipped:
            metrics.ROUTING_REJECTIONS.labels(record.virtual_model, reason).inc()
        if record.selection is not None and record.selection.affinity:
            metrics.ROUTING_AFFINITY.labels(record.selection.affinity).inc()
    return plan


def _virtual_models_below(name: str, table: RoutingTable, depth: int = 0) -> list[str]:
    virtual = table.virtual_models.get(name)
    if virtual is None or depth > 8:
        return []
    found = [name]
    for target in virtual.targets:
        found += _virtual_models_below(target.name, table, depth + 1)
    return found


def session_of(call: Call) -> Any:
    if call.session is None:
        from routing.core.sessions import detect_session

        call.session = detect_session(call.features, call.headers, key_id=call.key_scope)
    return call.session


def _no_candidates(plan: Plan, target: str) -> None:
    if plan.retry_after_s is not None:
        wait = max(1, math.ceil(plan.retry_after_s))
        raise GatewayError(503, f"Every target of `{target}` is cooling down after errors; retry in {wait}s.",
                           code="all_targets_cooling", headers={"Retry-After": str(wait)}, error_class="transient")
    if plan.rejected:
        reasons = sorted({reason for _name, reason in plan.rejected})
        raise GatewayError(400, f"No model behind `{target}` can serve this request: {', '.join(reasons)}.",
                           code="unsupported_capability", error_class="incompatible")
    raise GatewayError(503, f"No enabled target is configured for `{target}`.", code="no_target",
                       error_class="incompatible")


def _rules(contract: EffectiveContract) -> ValidationRules:
    checks = [resolve_validator(contract.validator)] if contract.validator else []
    return ValidationRules.from_contract(contract, extra_checks=checks)


async def _attempts(
    call: Call, journey: Journey, plan: Plan, contract: EffectiveContract, deadline: Deadline
) -> HttpResponse | StreamingHttpResponse:
    table = call.table
    models = plan.models
    rules = _rules(contract)
    wants_usage = client_wants_usage(call.inbound, call.body)
    stream = call.features.stream
    policy = state.retry_policy
    state.retry_budget.record_request(time.monotonic())
    index, same_retries, fallbacks = 0, 0, 0
    last: AttemptResult | None = None
    translation_error: TranslationError | None = None
    deadline_exhausted = False
    cooling_until: float | None = None
    while index < len(models):
        model = models[index]
        provider = table.providers[model.provider]
        health = state.health.get(model.name)
        now = time.monotonic()
        allowance = AttemptAllowance.for_target(health.latency_estimate_s)
        # The primary attempt always goes out while time remains (the client chose the deadline); a
        # retry or fallback only when it can still finish. A faster candidate further down may fit.
        launchable = deadline.can_launch(now, allowance) if journey.attempts else not deadline.expired(now)
        if not launchable:
            deadline_exhausted = True
            index += 1
            continue
        admission = health.begin(now)
        if admission == "refused":  # cooling down (a concrete model has no alternative to skip to)
            if health.cooldown_until is not None:
                cooling_until = min(cooling_until or health.cooldown_until, health.cooldown_until)
            index += 1
            continue
        probe = admission == "probe"
        record = AttemptRecord(seq=len(journey.attempts) + 1, target=model.name, provider=provider.name)
        journey.attempts.append(record)
        keys = provider.api_keys
        api_key = keys[state.next_key_index(provider.name, len(keys))].reveal() if keys else ""
        spec = AttemptSpec(provider=provider, model=model, body=call.body, inbound=call.inbound, stream=stream,
                           api_key=api_key, timeout_s=_attempt_timeout(deadline, now, allowance, models, index),
                           rules=rules, client_wants_usage=wants_usage)
        try:
            result = await (start_stream_attempt(spec) if stream else run_json_attempt(spec))
        except TranslationError as exc:
            health.end(time.monotonic(), probe=probe)
            translation_error = exc
            record.outcome = AttemptOutcome.failure(ErrorClass.INCOMPATIBLE, "unsupported", latency_s=0.0)
            record.action = "fallback" if index + 1 < len(models) else "gave_up"
            record.error_message = exc.message
            index += 1
            continue
        except BaseException:
            health.end(time.monotonic(), probe=probe)
            raise
        if isinstance(result, LiveStream):
            record.ttfb_s = result.ttfb_s
            health.record(AttemptOutcome.success(result.ttfb_s), time.monotonic())
            return _stream_response(call, journey, record, model, result, rules, health, probe)
        health.end(time.monotonic(), probe=probe)
        last = result
        outcome = result.outcome
        cooldown = health.record(outcome, time.monotonic())
        if cooldown is not None:
            metrics.ROUTING_COOLDOWNS.labels(model.name, cooldown.reason).inc()
        record.outcome = outcome
        record.ttfb_s = result.ttfb_s
        record.usage = result.usage
        record.cost = model_cost(model, result.usage) if result.usage else None
        record.validation = "accepted" if outcome.ok else (
            f"rejected:{result.verdict.reason}" if result.verdict and not result.verdict.ok else "not_run")
        record.health = _health_view(health, time.monotonic())
        _count_attempt(model.name, outcome)
        if outcome.ok:
            return _json_response(call, journey, record, model, result)
        if result.verdict is not None and not result.verdict.ok:
            metrics.VALIDATION_REJECTIONS.labels(result.verdict.reason).inc()
        action = policy.next_action(
            outcome, attempt_no=len(journey.attempts), same_route_retries=same_retries, fallbacks=fallbacks,
            stream_started=False, remaining_s=deadline.remaining(time.monotonic()),
            fallback_available=index + 1 < len(models), rng=state.rng, launch_allowance_s=allowance.total,
            budget=state.retry_budget, now=time.monotonic(),
        )
        record.action = {"give_up": "gave_up", "return_to_client": "returned_to_client"}.get(action.kind, action.kind)
        if action.kind == "retry_same":
            metrics.RETRIES.labels(outcome.reason).inc()
            same_retries += 1
            await asyncio.sleep(action.delay_s)
            continue
        if action.kind == "fallback":
            metrics.FALLBACKS.labels(outcome.reason).inc()
            index += 1
            same_retries = 0
            fallbacks += 1
            continue
        if action.reason == "retry_budget":
            metrics.RETRY_BUDGET_EXHAUSTED.inc()
        if action.reason == "deadline":
            deadline_exhausted = True
        break

    if last is None and translation_error is not None:
        raise GatewayError(translation_error.status, translation_error.message, param=translation_error.param,
                           code=translation_error.code, error_class="incompatible")
    if last is None and cooling_until is not None and not deadline_exhausted:
        wait = max(1, math.ceil(cooling_until - time.monotonic()))
        raise GatewayError(503, f"`{journey.target_name}` is cooling down after upstream errors; retry in {wait}s.",
                           code="all_targets_cooling", headers={"Retry-After": str(wait)}, error_class="transient")
    if last is None:
        metrics.DEADLINE_EXHAUSTED.inc()
        raise GatewayError(504, "The deadline ran out before any upstream attempt could be made.",
                           code="deadline_exceeded", error_class="transient")
    _raise_failure(call, journey, last, deadline_exhausted)
    raise AssertionError("unreachable")


def _attempt_timeout(
    deadline: Deadline, now: float, allowance: AttemptAllowance, models: list[ModelSpec], index: int
) -> float:
    """The remaining time, less what one fallback would need when a fallback exists.

    A hanging primary must not eat the whole deadline: when the next candidate's allowance can be set
    aside while this attempt still keeps its own, it is set aside.
    """
    remaining = deadline.attempt_timeout(now)
    if index + 1 >= len(models) or state.retry_policy.max_fallbacks == 0:
        return remaining
    following = state.health.get(models[index + 1].name)
    # What the fallback needs, with room for the gateway's own work between the two attempts.
    reserve = AttemptAllowance.for_target(following.latency_estimate_s).total * 1.25 + 0.1
    if remaining - reserve >= allowance.total:
        return remaining - reserve
    return remaining


def _health_view(health: Any, now: float) -> dict[str, Any]:
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


def _count_attempt(target: str, outcome: AttemptOutcome) -> None:
    word = "ok" if outcome.ok else outcome.reason
    metrics.ATTEMPTS.labels(target, word).inc()
    estimate = state.health.get(target).latency_estimate_s
    if estimate is not None:
        metrics.ROUTING_LATENCY_ESTIMATE.labels(target).set(estimate)
    metrics.ROUTING_OUTCOMES.labels(target, outcome.result).inc()
    if outcome.error_class is ErrorClass.AMBIGUOUS:
        metrics.AMBIGUOUS.labels(target).inc()


def _raise_failure(call: Call, journey: Journey, last: AttemptResult, deadline_exhausted: bool) -> None:
    outcome = last.outcome
    journey.error_class = str(outcome.error_class) if outcome.error_class else None
    if deadline_exhausted:
        metrics.DEADLINE_EXHAUSTED.inc()
    status = client_status(outcome, deadline_exhausted=deadline_exhausted)
    headers: dict[str, str] = {}
    if status in (503, 429) or outcome.retry_after_s:
        headers["Retry-After"] = str(max(1, math.ceil(outcome.retry_after_s or 1)))
    if outcome.error_class is ErrorClass.PERMANENT and last.error_body is not None:
        # The client's own mistake, as the provider explained it.
        model = call.table.models.get(journey.attempts[-1].target)
        provider = call.table.providers.get(model.provider) if model else None
        message = "The upstream provider refused the request."
        if provider is not None:
            error = get_adapter(provider.kind).parse_error(status=outcome.status or 400, data=last.error_body)
            message = error.message or message
        raise GatewayError(status, message, code=outcome.reason, error_class="permanent", headers=headers)
    words = {
        "rate_limited": "every eligible upstream is rate limiting",
        "overloaded": "every eligible upstream is overloaded",
        "timeout": "the upstream did not answer in time",
        "context_overflow": "the request does not fit the context window of any eligible model",
        "unsupported": "no eligible model supports a parameter of this request",
        "auth": "the gateway's provider credentials were refused",
        "not_found": "the provider does not know the configured model",
    }
    detail = words.get(outcome.reason, f"the last upstream attempt failed ({outcome.reason})")
    if deadline_exhausted:
        detail = f"the deadline ran out ({detail})"
    tried = len(journey.attempts)
    raise GatewayError(status, f"{detail[0].upper()}{detail[1:]}; {tried} attempt{'s' if tried != 1 else ''} made.",
                       code=outcome.reason, headers=headers, error_class=journey.error_class)


def _json_response(
    call: Call, journey: Journey, record: AttemptRecord, model: ModelSpec, result: AttemptResult
) -> HttpResponse:
    journey.answered_by = model
    journey.usage = result.usage
    journey.cost = record.cost
    journey.ttfb_s = result.ttfb_s
    journey.validation = "accepted"
    journey.answer = result.answer
    headers = journey.headers(call.request_id)
    keys = _execution_keys(journey, result.answer)
    if keys:
        headers["X-GoModel-Execution-Keys"] = json.dumps(keys, separators=(",", ":"))
    body = json.dumps(result.client_body, ensure_ascii=False, separators=(",", ":")).encode()
    response = HttpResponse(body, content_type="application/json", status=200)
    for name, value in headers.items():
        response[name] = value
    if journey.operation_id:
        journey.replay_blob = stored_answer(body, "application/json", headers)
    _after_success(call, journey)
    _finish(call, journey)
    return response


def _execution_keys(journey: Journey, answer: Answer | None) -> list[dict[str, str]]:
    if answer is None or not answer.tool_calls:
        return []
    op = journey.operation_id or f"req_{journey.attempts[-1].attempt_id}"
    return [{"tool_call_id": c.id, "name": c.name, "execution_key": execution_key(op, c.name, c.arguments)}
            for c in answer.tool_calls]


def _after_success(call: Call, journey: Journey) -> None:
    """Remember where this session was served: warm prompt cache and session keeping."""
    model = journey.answered_by
    if model is None or call.session is None or journey.plan is None:
        return
    now = time.monotonic()
    settings_ = call.table.settings
    state.warm.put(call.session.value, model.name, now, settings_.warm_cache_ttl_s)
    for record in journey.plan.records:
        virtual = call.table.virtual_models.get(record.virtual_model)
        if virtual is None or not virtual.session_affinity:
            continue
        served = next((t.name for t in virtual.targets
                       if t.name == model.name or model in call.table.leaf_models(t.name)), None)
        pinned = record.selection.affinity if record.selection else None
        if served is not None and (pinned != "honored" or record.winner != served):
            task = asyncio.get_running_loop().create_task(state.pins.put(
                TARGET_PIN_NAMESPACE, f"{record.virtual_model}|{call.session.value}", served,
                settings_.smart_routing_session_ttl_s))
            # The loop keeps only weak references to tasks: hold it until it is done.
            _background.add(task)
            task.add_done_callback(_background.discard)


def _stream_response(
    call: Call, journey: Journey, record: AttemptRecord, model: ModelSpec, live: LiveStream,
    rules: ValidationRules, health: Any, probe: bool,
) -> StreamingHttpResponse:
    journey.answered_by = model
    journey.ttfb_s = live.ttfb_s
    metrics.TTFT.labels(call.inbound).observe(live.ttfb_s)
    headers = journey.headers(call.request_id)

    kept: list[bytes] = []  # the stream as sent, for a repeat of an idempotent request (capped)
    kept_size = [0]

    def remember(frame: bytes) -> bytes:
        if journey.operation_id and kept_size[0] + len(frame) <= MAX_REPLAY_BYTES:
            kept.append(frame)
            kept_size[0] += len(frame)
        return frame

    async def frames() -> AsyncIterator[bytes]:
        translator = live.translator
        outcome: AttemptOutcome | None = None
        try:
            for frame in live.first_frames:
                yield remember(frame)
            try:
                async for chunk in live.chunks:
                    for frame in translator.feed(chunk):
                        yield remember(frame)
                for frame in translator.finish():
                    yield remember(frame)
                if not translator.complete:
                    failure = translator.failure
                    reason = "stream_cut" if failure is None else "server_error"
                    message = failure.message if failure else "The upstream stream ended before it was complete."
                    outcome = AttemptOutcome.failure(ErrorClass.AMBIGUOUS if failure is None else
                                                     ErrorClass.TRANSIENT, reason,
                                                     latency_s=time.monotonic() - live.started)
                    for frame in translator.error_frames("api_error", message):
                        yield remember(frame)
            except Exception as exc:
                from routing import upstream
                from routing.providers import MalformedResponse

                if isinstance(exc, MalformedResponse):
                    outcome = AttemptOutcome.failure(ErrorClass.INVALID_RESPONSE, "malformed",
                                                     latency_s=time.monotonic() - live.started)
                elif upstream.is_transport_error(exc):
                    outcome = AttemptOutcome.failure(ErrorClass.AMBIGUOUS, "stream_cut",
                                                     latency_s=time.monotonic() - live.started)
                else:
                    raise
                for frame in translator.error_frames("api_error", "The upstream stream failed mid-way."):
                    yield remember(frame)
        except (asyncio.CancelledError, GeneratorExit):
            outcome = AttemptOutcome.failure(ErrorClass.AMBIGUOUS, "client_disconnected",
                                             latency_s=time.monotonic() - live.started)
            raise
        finally:
            await live.response.aclose()
            now = time.monotonic()
            health.end(now, probe=probe)
            usage = translator.usage
            record.usage = usage
            record.cost = model_cost(model, usage)
            journey.usage, journey.cost = usage, record.cost
            answer = translator.answer
            journey.answer = answer
            if outcome is None:
                verdict = validate_answer(answer, rules, schema_validator=validate_instance)
                record.validation = journey.validation = "accepted" if verdict.ok else f"rejected:{verdict.reason}"
                outcome = AttemptOutcome.success(now - live.started)
            else:
                record.action = "gave_up"  # bytes already reached the client: nothing may replace them
                if outcome.reason != "client_disconnected":
                    health.record(outcome, now)
                journey.error_class = str(outcome.error_class)
                journey.error_message = outcome.reason
            record.outcome = outcome
            record.health = _health_view(health, now)
            _count_attempt(model.name, outcome)
            if outcome.ok:
                _after_success(call, journey)
            _finish(call, journey)
            if journey.operation_id:
                # Bytes reached the client: anything short of a complete stream is an unknown outcome.
                complete = outcome.ok and kept_size[0] < MAX_REPLAY_BYTES
                blob = stored_answer(b"".join(kept), "text/event-stream", headers) if complete else None
                await idempotency_store.finish(journey.operation_id, owner=call.request_id,
                                               outcome="completed" if complete else "unknown", answer=blob)

    response = RelayStream(frames(), content_type="text/event-stream", status=200)
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    for name, value in headers.items():
        response[name] = value
    return response


def _finish(call: Call, journey: Journey) -> None:
    """Metrics and the audit event; neither blocks the event loop."""
    elapsed = time.monotonic() - call.started
    label = journey.requested_model if call.table.kind_of(journey.requested_model) else "unknown"
    metrics.REQUESTS.labels(call.inbound, label, str(journey.status)).inc()
    metrics.REQUEST_DURATION.labels(call.inbound).observe(elapsed)
    metrics.ATTEMPTS_PER_REQUEST.observe(len(journey.attempts))
    if journey.answered_by is not None and journey.status == 200:
        metrics.ROUTE_LATENCY.labels(journey.answered_by.name).observe(elapsed)
        if journey.cost is not None:
            metrics.COST.labels(journey.answered_by.name).inc(journey.cost)
            metrics.COST_PER_ANSWER.observe(journey.cost)
    for record in journey.attempts:
        if record.outcome is not None and record.outcome.error_class is not None and record.cost:
            metrics.COST.labels(record.target).inc(record.cost)
    from routing.auditing import publish_event

    publish_event(call, journey, elapsed)
