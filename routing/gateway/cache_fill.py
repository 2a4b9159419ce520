"""Keeping an accepted answer in the response cache: a JSON answer from its body, a relayed stream from the frames
its client was sent once it ended well (assembled into the JSON body: routing.providers.streaming.cached_answers).

Only an answer that passed validation, with no error, and complete is kept: every choice ended naturally or with
tool calls; one cut at ``max_tokens`` only where the request's workload contract accepts truncated answers; never
one the provider filtered. The write never waits (routing/clients/response_cache_store.py).
"""

from __future__ import annotations

from typing import Any

from routing.core.answer import Answer
from routing.core.cache import storable_finish
from routing.gateway.cache_store import encode_entry, protocol_of, store, vectors
from routing.gateway.records import Call, Journey, usage_dict
from routing.ops import metrics
from routing.providers.streaming.cached_answers import assemble_body

_ANTHROPIC_STOPS = frozenset({"end_turn", "stop_sequence", "tool_use"})


def keeps_answer(journey: Journey) -> bool:
    """Whether this request's answer is to be kept (a miss or a refresh of a cached name)."""
    return journey.cache is not None and journey.cache.write


def fill_json(call: Call, journey: Journey, body: dict[str, Any] | None) -> None:
    """Keep an accepted JSON answer (``body``, the client's) when the request's cache decision says so."""
    if body is not None and keeps_answer(journey):
        _keep(call, journey, body)


def fill_stream(call: Call, journey: Journey, frames: bytes) -> None:
    """Keep a relayed stream's answer, assembled from the ``frames`` its client was sent, once it ended well."""
    if not keeps_answer(journey) or journey.status != 200:
        return
    usage = journey.usage
    openai_usage = None if usage is None else {
        "prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens}
    body = assemble_body(protocol_of(call), frames, usage=openai_usage)
    if body is not None:
        _keep(call, journey, body)


def _keep(call: Call, journey: Journey, body: dict[str, Any]) -> None:
    decision = journey.cache
    spec = call.table.caches.get(journey.requested_model)
    if decision is None or spec is None or not storable(call, journey, body):
        return
    entry = encode_entry(body=body, answer=journey.answer or Answer(), usage=usage_dict(journey.usage),
                         cost=journey.cost or 0.0,
                         target=journey.answered_by.name if journey.answered_by is not None else "",
                         request_id=call.request_id, created=call.started_unix)
    store().put(decision.key, entry, spec.ttl_s)
    if decision.vector is not None and decision.partition:  # a paraphrase in the same context may be served it
        vectors().add(decision.partition, decision.key, decision.vector, spec.ttl_s)
    metrics.CACHE_STORED.labels(decision.name).inc()


def storable(call: Call, journey: Journey, body: dict[str, Any]) -> bool:
    """An accepted, complete answer with no error (see the module docstring), judged on the answer and on every
    choice of the body."""
    answer = journey.answer
    if journey.validation != "accepted" or journey.error_class is not None or answer is None:
        return False
    contract = journey.contract
    truncation_allowed = contract is not None and contract.workload is not None and not contract.refuse_truncation
    if not storable_finish(answer.finish_reason, truncation_allowed=truncation_allowed):
        return False
    protocol = protocol_of(call)
    if protocol == "openai":
        finishes = [choice.get("finish_reason") for choice in body.get("choices") or [] if isinstance(choice, dict)]
        allowed = {"stop", "tool_calls", *(("length",) if truncation_allowed else ())}
        return bool(finishes) and all(finish in allowed for finish in finishes)
    if protocol == "anthropic":
        stop = body.get("stop_reason")
        return stop in _ANTHROPIC_STOPS or (truncation_allowed and stop == "max_tokens")
    status = body.get("status")
    return status == "completed" or (truncation_allowed and status == "incomplete"
                                     and (body.get("incomplete_details") or {}).get("reason") == "max_output_tokens")
