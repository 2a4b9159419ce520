"""One client request end to end: resolve -> classify -> select -> attempts -> validate -> respond.

Nothing here touches the database: the routing table, health, pins and budgets are in memory (pins in
Redis when configured), the upstream call is the only I/O, and the audit event is handed to a publisher
thread. The request's records are in ``routing.journey``; answering the client (JSON or a relayed stream)
and finishing a request (metrics, audit) are in ``routing.responses``.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
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
from routing.core.contracts import EffectiveContract, effective_contract
from routing.core.deadline import AttemptAllowance, Deadline
from routing.core.errors import AttemptOutcome, ErrorClass
from routing.core.ledger import operation_id
from routing.core.requirements import requirements_from_features
from routing.core.retry import client_status
from routing.core.table import ModelSpec, RoutingTable
from routing.core.validate import ValidationRules
from routing.errors import GatewayError
from routing.journey import Call, Journey
from routing.planning import TARGET_PIN_NAMESPACE, Plan, PlanInputs, plan_targets
from routing.providers import TranslationError, client_wants_usage, get_adapter
from routing.responses import count_attempt, finish, health_view, json_response, stream_response
from routing.schemacheck import schema_problems
from routing.state import state
from routing.tiers import decide_tier
from routing.validators_registry import resolve_validator


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
        finish(call, journey)
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
            return stream_response(call, journey, record, model, result, rules, health, probe)
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
        record.health = health_view(health, time.monotonic())
        count_attempt(model.name, outcome)
        if outcome.ok:
            return json_response(call, journey, record, model, result)
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


