"""``POST /v1/messages/count_tokens``: counted by an Anthropic provider behind the name, estimated otherwise.

The name is admitted as for ``/v1/messages`` (it must exist, the key may use it, and it serves chat). The first
model behind it (in declaration order) on an Anthropic-kind provider (``anthropic``, or ``vertex_anthropic``:
Claude on Vertex AI) that is not cooling down counts the
tokens with Anthropic's own endpoint; the answer says ``X-GoModel-Token-Count: provider``. With no such
model, or when that provider fails (5xx, 429, a network error, an answer without a count), the gateway's
own estimate answers instead, marked ``X-GoModel-Token-Count: estimate``: the characters of the system
prompt, messages and tool definitions at four a token, plus an allowance per image (the estimate tier and
context checks use). A count is advisory, so a failing provider is not retried, cooled or charged; a 4xx
from it (the client's mistake) is answered as that mistake. A count is a request: it counts toward the key's and
team's requests per minute and concurrency (``routing.gateway.governance.RequestCount``, in the view), never
their tokens or budget; the audit trail records it (``endpoint: count_tokens``).
"""

from __future__ import annotations

import json
import math
import time

from django.conf import settings
from django.http import HttpResponse

from routing.clients import gcp_tokens, upstream
from routing.clients.gcp_tokens import GOOGLE_TOKEN_KINDS
from routing.core.error_classifier import classify_exception, classify_http_error
from routing.core.features import CHARS_PER_TOKEN
from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.core.table import ModelSpec
from routing.gateway.client_answer import finish
from routing.gateway.gateway_error import GatewayError
from routing.gateway.records import AttemptRecord, Call, Journey
from routing.gateway.resolve import admit
from routing.gateway.state import state
from routing.providers import MalformedResponse, get_adapter
from routing.providers.anthropic.adapter import dropped_betas_header
from routing.providers.anthropic.count_tokens import COUNTING_KINDS, build_count_tokens_request, parse_count_tokens

COUNT_SOURCE_HEADER = "X-GoModel-Token-Count"  # "provider" or "estimate"
MAX_ERROR_BODY_BYTES = 64 * 1024


def estimate_tokens(call: Call) -> int:
    """The gateway's estimate: the features' input estimate plus the tool definitions at four characters a token."""
    tools = call.body.get("tools")
    tool_chars = len(json.dumps(tools, ensure_ascii=False, separators=(",", ":"))) if isinstance(tools, list) else 0
    return call.features.estimated_input_tokens + math.ceil(tool_chars / CHARS_PER_TOKEN)


def _counting_model(call: Call) -> ModelSpec | None:
    now = time.monotonic()
    for model in call.table.leaf_models(call.features.model):
        provider = call.table.providers.get(model.provider)
        if provider is None or provider.kind not in COUNTING_KINDS:
            continue
        if not provider.api_keys and provider.kind not in GOOGLE_TOKEN_KINDS:
            continue
        if state.health.get(model.name).vitals(now).available:
            return model
    return None


async def count_tokens(call: Call) -> HttpResponse:
    """Answer one count_tokens request; GatewayError for anything the client should hear about as an error."""
    journey = Journey(requested_model=call.features.model, endpoint=call.inbound)
    try:
        admit(call, "chat")
        model = _counting_model(call)
        counted = await _ask_provider(call, journey, model) if model is not None else None
    except GatewayError as exc:
        journey.status = exc.status
        journey.error_class = journey.error_class or exc.error_class
        journey.error_message = exc.message
        exc.headers = {**journey.headers(call.request_id), **exc.headers}
        finish(call, journey)
        raise
    if counted is not None and model is not None:
        journey.answered_by = model
        tokens, source = counted, "provider"
    else:
        tokens, source = estimate_tokens(call), "estimate"
    headers = journey.headers(call.request_id)
    headers[COUNT_SOURCE_HEADER] = source
    if journey.answered_by is not None:
        provider = call.table.providers.get(journey.answered_by.provider)
        headers.update(dropped_betas_header(call.headers, provider, "anthropic"))
    response = HttpResponse(json.dumps({"input_tokens": tokens}).encode(), content_type="application/json")
    for name, value in headers.items():
        response[name] = value
    finish(call, journey)
    return response


async def _ask_provider(call: Call, journey: Journey, model: ModelSpec) -> int | None:
    """The provider's count, or None when it failed in a way the estimate may stand in for."""
    provider = call.table.providers[model.provider]
    keys = provider.api_keys
    if provider.kind in GOOGLE_TOKEN_KINDS:  # Vertex AI: the key is the provider's current access token
        keys, _problems = await gcp_tokens.access_keys(provider)
        if not keys:
            return None  # no token yet: the estimate answers (the attempt path reports the problem)
    api_key = keys[state.next_key_index(provider.name, len(keys))].reveal()
    built = build_count_tokens_request(provider, model, call.body, api_key, call.headers)
    payload = json.dumps(built.json, ensure_ascii=False, separators=(",", ":")).encode()
    timeout = min(provider.timeout_s, settings.GOMODEL_DEFAULT_DEADLINE_MS / 1000.0)
    request = upstream.build(built.method, built.url, built.headers, payload, timeout, provider=provider)
    record = AttemptRecord(seq=1, target=model.name, provider=provider.name)
    journey.attempts.append(record)
    started = time.monotonic()
    try:
        response = await upstream.send(request)
        try:
            data = await response.aread()
        finally:
            await response.aclose()
    except Exception as exc:
        if not upstream.is_transport_error(exc):
            raise
        record.outcome = classify_exception(upstream.exception_kind(exc, first_byte_seen=False),
                                            latency_s=time.monotonic() - started)
        record.action = "estimated"
        return None
    latency = time.monotonic() - started
    if response.status_code >= 300:
        outcome = classify_http_error(response.status_code, response.header_dict(), data[:MAX_ERROR_BODY_BYTES],
                                      provider.kind, latency_s=latency, now_unix=time.time())
        record.outcome = outcome
        if outcome.error_class is ErrorClass.PERMANENT and response.status_code < 500 and response.status_code not in (
                401, 403, 404):
            record.action = "returned_to_client"
            error = get_adapter(provider.kind).parse_error(status=response.status_code, data=data)
            raise GatewayError(response.status_code, error.message or "The provider refused the request.",
                               code="invalid_request", error_class="permanent")
        record.action = "estimated"
        return None
    try:
        tokens = parse_count_tokens(data)
    except MalformedResponse:
        record.outcome = AttemptOutcome.failure(ErrorClass.INVALID_RESPONSE, "malformed", status=response.status_code,
                                                latency_s=latency)
        record.action = "estimated"
        return None
    record.outcome = AttemptOutcome.success(latency, response.status_code)
    return tokens
