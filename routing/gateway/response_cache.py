"""The response cache on the request path: look a request of a cached name up before it is routed.

A request for a name with a ``caches`` entry (routing.core.cache) is looked up once its key's limits and access to
the model are admitted, before any routing decision. A hit is answered from the entry (JSON, or replayed as a
stream in the client's protocol: routing.providers.streaming.cached_answers) without a provider call: it costs
nothing and charges no tokens (the request still counts toward the key's requests), and its audit revision names
the request that filled the entry. A miss is routed as usual and its answer kept if it qualifies
(routing.gateway.cache_fill). No database is read here; the store is this process's memory, or Redis with
``REDIS_URL`` (routing/clients/response_cache_store.py), whose outage makes every lookup a miss.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from django.http import HttpResponse, StreamingHttpResponse

from routing.core.answer import Usage
from routing.core.cache import (
    DirectiveError,
    directive,
    exact_key,
    latest_user_turn,
    scope_of,
    semantic_partition,
)
from routing.gateway import governance, stored_responses
from routing.gateway.bytes_response import BytesResponse
from routing.gateway.cache_store import answer_of, decode_entry, protocol_of, store, vectors
from routing.gateway.client_answer import RelayStream, finish
from routing.gateway.gateway_error import GatewayError
from routing.gateway.records import CacheDecision, Call, Journey
from routing.gateway.response_headers import set_headers
from routing.ops import metrics
from routing.providers import client_wants_usage
from routing.providers.responses_api.ids import item_id
from routing.providers.streaming.cached_answers import replay_frames

_ITEM_PREFIXES = {"message": "msg", "function_call": "fc", "reasoning": "rs"}


def _key_body(call: Call) -> dict[str, Any]:
    """What the key reads of the body: the client's own, and for Responses its whole conversation as ``input``
    (the turns of ``previous_response_id`` and the items its references name, not the ids)."""
    responses = call.responses
    if responses is None:
        return call.body
    return {**responses.request.body, "input": responses.conversation}


# The vector of a text by the gateway's own embeddings model, as a request of the caller's key (the engine's).
Embed = Callable[[Call, str, str], Awaitable[list[float] | None]]


async def lookup(call: Call, journey: Journey, *, embed: Embed) -> HttpResponse | StreamingHttpResponse | None:
    """The answer from the cache for a hit; None for a request to route (its journey then says whether to keep the
    answer). GatewayError (400) for a cache header with a value it does not take."""
    spec = call.table.caches.get(journey.requested_model)
    if spec is None or call.endpoint not in ("chat", "responses"):
        return None
    try:
        wanted = directive(call.headers)
    except DirectiveError as exc:
        raise GatewayError(400, str(exc), param=exc.header, error_class="permanent") from None
    name = spec.name
    if not wanted.read and not wanted.write:
        journey.cache = CacheDecision(name, "bypass", reason=wanted.reason)
        metrics.CACHE_REQUESTS.labels(name, "bypass").inc()
        return None
    key = call.key
    scope = scope_of(spec, key_id=call.key_scope, team=key.team_name if key is not None else None)
    protocol, body = protocol_of(call), _key_body(call)
    workload = call.headers.get("x-gomodel-workload", "")
    betas = call.headers.get("anthropic-beta", "") if call.inbound == "anthropic" else ""
    entry_key = exact_key(spec, scope=scope, protocol=protocol, requested_model=journey.requested_model, body=body,
                          workload=workload, betas=betas)
    decision = CacheDecision(name, "miss", key=entry_key, scope=scope, reason=wanted.reason, write=wanted.write)
    journey.cache = decision
    raw = await store().get(entry_key) if wanted.read else None
    entry = decode_entry(raw) if raw is not None else None
    if entry is not None:
        decision.outcome = "hit"
    elif spec.semantic is not None:
        turn = latest_user_turn(protocol, body)
        if turn is not None:
            text, context = turn
            vector = await embed(call, spec.semantic.embeddings, text)
            if vector is None:
                decision.reason = decision.reason or "no-embedding"
            else:
                decision.vector = vector
                decision.partition = semantic_partition(spec, scope=scope, protocol=protocol, context=context,
                                                        requested_model=journey.requested_model, workload=workload,
                                                        betas=betas)
                entry = await _nearest(decision, spec.semantic.threshold) if wanted.read else None
    if entry is None:
        metrics.CACHE_REQUESTS.labels(name, "miss").inc()
        return None
    decision.write = False
    decision.filled_by = str(entry.get("request_id", ""))
    decision.target = str(entry.get("target", ""))
    decision.saved_usd = float(entry.get("cost") or 0.0)
    metrics.CACHE_REQUESTS.labels(name, decision.outcome).inc()
    if decision.saved_usd:
        metrics.CACHE_SAVED.labels(name).inc(decision.saved_usd)
    return await _answer(call, journey, entry)


async def _nearest(decision: CacheDecision, threshold: float) -> dict[str, Any] | None:
    """The kept entry nearest to the decision's vector in its partition, at or above ``threshold`` (a semantic hit:
    the decision says so and how near); None when there is none."""
    if decision.vector is None:
        return None
    found = await vectors().nearest(decision.partition, decision.vector)
    if found is None or found[1] < threshold:
        return None
    raw = await store().get(found[0])  # an entry expired or evicted since it was indexed is a miss
    entry = decode_entry(raw) if raw is not None else None
    if entry is not None:
        decision.outcome = "semantic-hit"
        decision.similarity = round(found[1], 6)
    return entry


async def _answer(call: Call, journey: Journey, entry: dict[str, Any]) -> HttpResponse | StreamingHttpResponse:
    """The hit's response; the request is finished (metrics, audit) and its limits settled at no charge."""
    body: dict[str, Any] = entry["body"]
    if call.responses is not None:
        body = _as_this_response(call, body)
    journey.answer = answer_of(entry)
    journey.usage = Usage()
    journey.cost = 0.0
    journey.validation = "accepted"
    journey.ttfb_s = time.monotonic() - call.started
    stored_responses.remember(call, journey)  # a Responses hit is a turn like any other
    headers = journey.headers(call.request_id)
    finish(call, journey)
    await governance.settle_limits(call, journey)
    if not call.features.stream:
        return BytesResponse(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(),
                             "application/json", headers)
    frames = b"".join(replay_frames(protocol_of(call), body,
                                    include_usage=client_wants_usage(call.inbound, call.body)))
    response = RelayStream(_once(frames), content_type="text/event-stream", status=200)
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    set_headers(response, headers)
    return response


async def _once(frames: bytes) -> AsyncIterator[bytes]:
    yield frames


def _as_this_response(call: Call, body: dict[str, Any]) -> dict[str, Any]:
    """A kept Response as this request's own: its response id and time, new output item ids (indexed with this
    turn for ``item_reference``)."""
    responses = call.responses
    if responses is None:
        return body
    output: list[dict[str, Any]] = []
    for item in body.get("output") or []:
        if isinstance(item, dict):
            if isinstance(item.get("id"), str):
                item = {**item, "id": item_id(_ITEM_PREFIXES.get(str(item.get("type")), "msg"), responses.response_id)}
            output.append(item)
    responses.output.follow(lambda: output)
    return {**body, "id": responses.response_id, "created_at": responses.created, "output": output}
