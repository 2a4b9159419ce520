"""One client request end to end: resolve -> classify -> select -> attempts -> validate -> respond.

Nothing here touches the database: the routing table, health, pins and budgets are in memory (pins in
Redis when configured), the upstream call is the only I/O, and the audit event is handed to a publisher
thread. The steps live in their own modules: ``resolve`` (may the key use the model, which contract),
``tiers``, ``planning``, ``attempt_loop``; the request's records are in ``records``; answering the client
(JSON or a relayed stream) and finishing a request (metrics, audit) are in ``responses``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import time
from typing import NoReturn

from django.http import HttpResponse, StreamingHttpResponse

from routing.clients import idempotency_store
from routing.core.contracts import EffectiveContract
from routing.core.deadline import Deadline, DeadlineHeaderError
from routing.core.embeddings import EmbeddingsRequestError, parse_embeddings_request
from routing.core.features import extract_features
from routing.core.ledger import canonical_json, operation_id, request_fingerprint
from routing.core.outcome import ErrorClass
from routing.core.table import CategoryRouteSpec, TierRouteSpec
from routing.gateway import response_cache
from routing.gateway.attempt_loop import AttemptLoop
from routing.gateway.categories import decide_category
from routing.gateway.client_answer import RelayStream, finish
from routing.gateway.gateway_error import GatewayError
from routing.gateway.governance import admit_limits, settle_limits, settle_limits_soon
from routing.gateway.planning import TARGET_PIN_NAMESPACE, PlanInputs, plan_targets
from routing.gateway.policies import choose_policy, count_decision, settle_policy, unmet_error
from routing.gateway.random_ids import random_id
from routing.gateway.records import Call, CategoryDecision, Journey, Plan
from routing.gateway.resolve import admit, route_chain
from routing.gateway.responses_endpoint import continue_conversation
from routing.gateway.state import state
from routing.gateway.tier_escalation import escalate_for_capability
from routing.gateway.tiers import decide_tier
from routing.ops import metrics
from routing.ops.settings_cache import cached_settings

CLIENT_CLOSED_REQUEST = 499  # nginx's status for a request its client abandoned; only the audit trail sees it


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
        await settle_limits(call, journey)
        raise
    except asyncio.CancelledError:
        # The client hung up (or the worker is stopping) before an answer: the decision and any attempt
        # already sent are still audited, as a stream cut at the same point would be.
        journey.status = CLIENT_CLOSED_REQUEST
        journey.error_class = "ambiguous" if journey.attempts else "client_disconnected"
        journey.error_message = "the client disconnected before the answer"
        finish(call, journey)
        settle_limits_soon(call, journey)  # this task is being cancelled: its concurrency slot must still return
        raise
    except BaseException:
        settle_limits_soon(call, journey)
        raise
    if not isinstance(response, RelayStream):  # a stream settles its limits when it ends (responses.py)
        await settle_limits(call, journey)
    return response


async def _route(call: Call, journey: Journey) -> HttpResponse | StreamingHttpResponse:
    await admit_limits(call, journey)  # first: every answer to a limited key carries its x-ratelimit-* headers
    kind = admit(call, "embeddings" if call.embeddings is not None else "chat")
    if call.responses is not None:  # its stored conversation is read only for a key within limits and access
        await continue_conversation(call)
    journey.policy = choose_policy(call)  # an unknown policy is a 400 before anything is decided
    cached = await response_cache.lookup(call, journey, embed=embed_for_cache)  # a hit needs no routing at all
    if cached is not None:
        return cached
    try:
        target, contract = await route_chain(call, kind, journey.requested_model, _RequestSteps(journey))
    finally:
        if journey.tier is not None:  # by the tier used (or chosen, when the request is refused here)
            metrics.SMART_REQUESTS.labels(journey.tier.alias, journey.tier.tier).inc()
    journey.target_name = target
    journey.contract = contract

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
        if plan.policy_unmet is not None and journey.policy is not None:
            raise unmet_error(journey.policy, plan, state.health.config.latency_decay_s)
        _no_candidates(plan, target)
    try:
        response = await AttemptLoop(call, journey, plan.models, contract, deadline).run()
    except BaseException:
        if journey.operation_id:
            # An ambiguous attempt may have run: never record "nothing happened" for it.
            outcome: idempotency_store.FinishOutcome = (
                "unknown" if journey.error_class == ErrorClass.AMBIGUOUS else "failed"
            )
            await idempotency_store.finish(journey.operation_id, owner=call.request_id, outcome=outcome)
        raise
    if journey.operation_id and journey.replay_blob is not None:
        await idempotency_store.finish(journey.operation_id, owner=call.request_id, outcome="completed",
                                       answer=journey.replay_blob)
    return response


class _RequestSteps:
    """The chain's steps for a real request: decisions recorded on the journey, the session pin written, counted."""

    def __init__(self, journey: Journey) -> None:
        self.journey = journey

    def category(self, call: Call, route: CategoryRouteSpec) -> CategoryDecision:
        self.journey.category = decide_category(call, route)
        return self.journey.category

    async def tier(self, call: Call, route: TierRouteSpec) -> str:
        self.journey.tier = await decide_tier(call, route)
        return self.journey.tier.target

    async def escalate(self, call: Call, route: TierRouteSpec, target: str, route_contract: str | None,
                       contract: EffectiveContract) -> tuple[str, EffectiveContract]:
        decision = self.journey.tier
        if decision is None:  # the chain escalates only after tier(), which sets it
            return target, contract
        route = call.table.tier_routes[decision.alias]
        contract = await escalate_for_capability(call, route, decision, route_contract, contract)
        return decision.target, contract


async def embed_for_cache(call: Call, model: str, text: str) -> list[float] | None:
    """The vector of ``text`` by the gateway's embeddings model ``model``, asked as an embeddings request of the
    caller's key: through its access, limits, routing and audit like any other, so it is spent and counted. None
    when it cannot be had (the key may not use the model, a limit, every target failing): the request is then
    matched exactly only."""
    body = {"model": model, "input": text}
    try:
        parsed = parse_embeddings_request(body)
    except EmbeddingsRequestError:
        return None
    features = dataclasses.replace(extract_features({"model": model}, "openai"),
                                   estimated_input_tokens=parsed.estimated_tokens())
    embedding = Call(request_id=random_id(), inbound="openai", key=call.key, body=body, features=features,
                     headers={}, table=call.table, endpoint="embeddings", embeddings=parsed)
    try:
        response = await handle(embedding)
    except GatewayError:
        return None
    try:
        vector = json.loads(response.content)["data"][0]["embedding"]
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None
    if not isinstance(vector, list) or not all(isinstance(v, int | float) for v in vector):
        return None
    return [float(v) for v in vector]


def _deadline(call: Call, contract: EffectiveContract) -> Deadline:
    try:
        return Deadline.start(
            call.started,
            header=call.headers.get("x-gomodel-deadline-ms"),
            contract_ms=contract.deadline_ms,
            default_ms=cached_settings.GOMODEL_DEFAULT_DEADLINE_MS,
        )
    except DeadlineHeaderError as exc:
        raise GatewayError(400, str(exc), param="X-GoModel-Deadline-Ms", error_class="permanent") from None


async def _idempotency_begin(call: Call, journey: Journey, deadline: Deadline) -> HttpResponse | None:
    if journey.operation_id is None:
        raise RuntimeError("an idempotent request has an operation id")
    # Responses: the client's own body (its chat equivalent is the gateway's), and its endpoint in the path.
    body = call.responses.request.body if call.responses is not None else call.body
    fingerprint = request_fingerprint(canonical_json({"path": call.audit_endpoint, "body": body}))
    remaining = deadline.remaining(time.monotonic())
    try:
        decision = await idempotency_store.begin(journey.operation_id, fingerprint=fingerprint,
                                                 owner=call.request_id, lease_s=remaining + 30.0)
    except idempotency_store.StoreUnavailable:
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
    below = table.virtual_models_below(target)
    affine = [name for name in below if table.virtual_models[name].session_affinity]
    # Session keeping and the warm-cache bonus only matter when there is a choice to make: a request for a
    # concrete model skips session detection altogether. Embeddings have neither conversation nor prompt cache;
    # keeping their "session" (every request of a key looks alike) would pin all of a key's embeddings to one
    # target of a balancing virtual model.
    if below and call.embeddings is None:
        session = call.session
        now = time.monotonic()
        warm = state.warm.get(session.value, now)
        for name in affine:
            pinned = await state.pins.get(TARGET_PIN_NAMESPACE, f"{name}|{session.value}")
            if pinned:
                session_targets[name] = pinned
    inputs = PlanInputs(table=table, contract=contract, session_targets=session_targets, warm_target=warm,
                        now=time.monotonic(), policy=journey.policy)
    plan = plan_targets(target, inputs, state)
    settle_policy(journey.policy, plan)
    count_decision(journey.policy)
    for record in plan.records:
        if record.winner:
            metrics.ROUTING_SELECTIONS.labels(record.virtual_model, record.strategy, record.winner).inc()
        for _name, reason in record.skipped:
            metrics.ROUTING_REJECTIONS.labels(record.virtual_model, reason).inc()
        if record.selection is not None and record.selection.affinity:
            metrics.ROUTING_AFFINITY.labels(record.selection.affinity).inc()
    return plan


def _no_candidates(plan: Plan, target: str) -> NoReturn:
    if plan.retry_after_s is not None:
        wait = max(1, math.ceil(plan.retry_after_s))
        raise GatewayError(503, f"Every target of `{target}` is cooling down after errors; retry in {wait}s.",
                           code="all_targets_cooling", headers={"Retry-After": str(wait)}, error_class="transient")
    if plan.limit_retry_after_s is not None:
        wait = max(1, math.ceil(plan.limit_retry_after_s))
        raise GatewayError(503, f"Every eligible target of `{target}` has used its provider's requests or tokens per "
                                f"minute; retry in {wait}s.", code="provider_limit_reached",
                           headers={"Retry-After": str(wait)}, error_class="transient")
    if plan.rejected:
        reasons = sorted({reason for _name, reason in plan.rejected})
        raise GatewayError(400, f"No model behind `{target}` can serve this request: {', '.join(reasons)}.",
                           code="unsupported_capability", error_class="incompatible")
    raise GatewayError(503, f"No enabled target is configured for `{target}`.", code="no_target",
                       error_class="incompatible")
