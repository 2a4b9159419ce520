"""The client API: async Django views built from DRF's renderer; bodies are parsed by routing/api/body_check.py.

DRF 3.18 has no async views, and a sync view under ASGI would buffer whole streams, so each endpoint is an
``async def`` that uses DRF's pieces directly. No database query, sync middleware or blocking call runs
here: keys and routes come from the in-memory RoutingTable. Who the caller is was decided before the body was
read (routing/api/gateway_auth.py); every view but ``openapi`` refuses a caller without a valid key.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.http.request import HttpHeaders
from rest_framework.renderers import JSONRenderer

from routing.api.arrival import arrival_of
from routing.api.body_check import check_body, check_nesting, check_tool_schemas, parse_body
from routing.api.gateway_auth import caller_of
from routing.api.relay_request import RelayRequest, header_name
from routing.config.runtime import current_table
from routing.core.categories import known_strengths
from routing.core.embeddings import EmbeddingsRequestError, parse_embeddings_request
from routing.core.features import extract_features
from routing.core.limits import ERROR_CODES
from routing.core.table import ENDPOINTS, RoutingTable
from routing.gateway import engine
from routing.gateway.count_tokens import count_tokens as count_tokens_call
from routing.gateway.gateway_error import GatewayError
from routing.gateway.governance import RequestCount
from routing.gateway.inspection.explain import explain_call
from routing.gateway.random_ids import random_id
from routing.gateway.records import Call
from routing.gateway.responses_endpoint import responses_call
from routing.ops.settings_cache import cached_settings
from routing.providers.errors import Inbound, client_error_body

LIMIT_CODES = frozenset(ERROR_CODES.values())
_renderer = JSONRenderer()


def error_response(inbound: Inbound, exc: GatewayError, request_id: str | None = None) -> HttpResponse:
    """The error in the client's envelope, with its status and headers (Retry-After, X-Request-Id, ...)."""
    body = client_error_body(inbound, exc.status, exc.message, type=exc.type, code=exc.code, param=exc.param)
    if inbound == "anthropic" and exc.code in LIMIT_CODES:
        # Anthropic's envelope has no code; a limit's is kept so a client can tell a budget from a rate limit.
        body["error"]["code"] = exc.code
    response = HttpResponse(_renderer.render(body), content_type="application/json", status=exc.status)
    for name, value in exc.headers.items():
        response[name] = value
    if request_id and "X-Request-Id" not in exc.headers:
        response["X-Request-Id"] = request_id
    return response


_UNPREFIXED_HEADERS = frozenset(HttpHeaders.UNPREFIXED_HEADERS)


def client_headers(request: HttpRequest) -> dict[str, str]:
    """The request's headers by lower-case name: ``{name.lower(): value for name, value in
    request.headers.items()}``, read from ``META`` as Django's ``HttpHeaders`` reads it (``HTTP_X_FOO`` is
    ``x-foo``; ``CONTENT_TYPE`` and ``CONTENT_LENGTH`` are headers too) without its mapping built on the way:
    about sixty Python calls fewer per request. A relay endpoint's request has collected them already."""
    if isinstance(request, RelayRequest):
        return request.lower_headers
    headers: dict[str, str] = {}
    for key, value in request.META.items():
        if key[:5] == "HTTP_":
            key = key[5:]
        elif key not in _UNPREFIXED_HEADERS:
            continue
        headers[header_name(key)] = value
    return headers


def _read_json(request: HttpRequest) -> dict[str, Any]:
    """The body as a JSON object, within the size and nesting bounds; GatewayError (413, 400) otherwise.

    The ASGI handlers have refused an oversized body while it arrived (routing/api/body_read.py); the size
    check here covers a request built another way (Django's test client). ``read()`` rather than ``body``:
    Django's ``body`` applies DATA_UPLOAD_MAX_MEMORY_SIZE, the smaller limit of the non-API paths.
    """
    length = request.META.get("CONTENT_LENGTH")
    limit = cached_settings.GOMODEL_MAX_BODY_BYTES
    if length and length.isdigit() and int(length) > limit:
        raise GatewayError(413, f"The request body is larger than the limit of {limit} bytes.",
                           code="request_too_large", error_class="permanent")
    raw = request.read(limit + 1)
    if len(raw) > limit:
        raise GatewayError(413, f"The request body is larger than the limit of {limit} bytes.",
                           code="request_too_large", error_class="permanent")
    if not raw.strip():
        raise GatewayError(400, "The request body is empty; send a JSON object.", code="invalid_json",
                           error_class="permanent")
    data = parse_body(raw)  # 400 for invalid JSON, a non-finite number or a lone surrogate, naming the field
    if not isinstance(data, dict):
        raise GatewayError(400, "The request body must be a JSON object.", code="invalid_json",
                           error_class="permanent")
    check_nesting(data)
    if b'"pattern' in raw:  # a byte search, so only a body that may hold a pattern pays for the schema walk
        check_tool_schemas(data)
    return data


def _prepare(request: HttpRequest, inbound: Inbound, request_id: str, body: dict[str, Any] | None = None) -> Call:
    table = current_table()
    caller = caller_of(request, table)
    body = _read_json(request) if body is None else body
    check_body(body, inbound)
    headers = client_headers(request)
    arrival = arrival_of(request)  # the deadline counts from here: the upload is part of the client's time
    return Call(
        request_id=request_id,
        inbound=inbound,
        key=caller.key,
        body=body,
        features=extract_features(body, inbound),
        headers=headers,
        table=table,
        started=arrival.monotonic,
        started_unix=arrival.unix,
    )


async def _proxy(request: HttpRequest, inbound: Inbound) -> HttpResponseBase:
    if request.method != "POST":
        return error_response(inbound, GatewayError(405, f"Use POST for {request.path}.", code="method_not_allowed"))
    request_id = random_id()
    try:
        return await engine.handle(_prepare(request, inbound, request_id))
    except GatewayError as exc:
        return error_response(inbound, exc, request_id)


async def chat_completions(request: HttpRequest) -> HttpResponseBase:
    """POST /v1/chat/completions (OpenAI shape)."""
    return await _proxy(request, "openai")


async def messages(request: HttpRequest) -> HttpResponseBase:
    """POST /v1/messages (Anthropic shape)."""
    return await _proxy(request, "anthropic")


async def embeddings(request: HttpRequest) -> HttpResponseBase:
    """POST /v1/embeddings (OpenAI shape): through the same keys, limits, routing and fallbacks as chat."""
    if request.method != "POST":
        return error_response("openai", GatewayError(405, f"Use POST for {request.path}.", code="method_not_allowed"))
    request_id = random_id()
    try:
        return await engine.handle(_prepare_embeddings(request, request_id))
    except GatewayError as exc:
        return error_response("openai", exc, request_id)


def _prepare_embeddings(request: HttpRequest, request_id: str, body: dict[str, Any] | None = None) -> Call:
    table = current_table()
    caller = caller_of(request, table)
    body = _read_json(request) if body is None else body
    try:
        parsed = parse_embeddings_request(body)
    except EmbeddingsRequestError as exc:
        raise GatewayError(400, exc.message, param=exc.param, code="invalid_request",
                           error_class="permanent") from None
    # The chat features of an embeddings body are empty but for the model; its input tokens are estimated
    # from the inputs, so the key's token limits see them before the provider counts them.
    features = dataclasses.replace(extract_features({"model": parsed.model}, "openai"),
                                   estimated_input_tokens=parsed.estimated_tokens())
    arrival = arrival_of(request)
    return Call(request_id=request_id, inbound="openai", key=caller.key, body=body, features=features,
                headers=client_headers(request), table=table,
                started=arrival.monotonic, started_unix=arrival.unix, endpoint="embeddings", embeddings=parsed)


async def responses(request: HttpRequest) -> HttpResponseBase:
    """POST /v1/responses (OpenAI's Responses API): routed like chat completions, answered as a Response."""
    if request.method != "POST":
        return error_response("openai", GatewayError(405, f"Use POST for {request.path}.", code="method_not_allowed"))
    request_id = random_id()
    try:
        return await engine.handle(await _prepare_responses(request, request_id))
    except GatewayError as exc:
        return error_response("openai", exc, request_id)


async def _prepare_responses(request: HttpRequest, request_id: str) -> Call:
    table = current_table()
    caller = caller_of(request, table)
    body = _read_json(request)
    arrival = arrival_of(request)
    return await responses_call(body, request_id=request_id, key=caller.key, table=table,
                                headers=client_headers(request),
                                started=arrival.monotonic, started_unix=arrival.unix)


async def count_tokens(request: HttpRequest) -> HttpResponseBase:
    """POST /v1/messages/count_tokens (Anthropic shape): the provider's count, or the gateway's marked estimate."""
    if request.method != "POST":
        return error_response("anthropic", GatewayError(405, f"Use POST for {request.path}.",
                                                        code="method_not_allowed"))
    request_id = random_id()
    try:
        table = current_table()
        caller = caller_of(request, table)
        body = _read_json(request)
        # The Messages body's checks, but for max_tokens, which a count does not take.
        check_body({**body, "max_tokens": 1}, "anthropic")
        arrival = arrival_of(request)
        call = Call(request_id=request_id, inbound="anthropic", key=caller.key, body=body,
                    features=extract_features(body, "anthropic"),
                    headers=client_headers(request), table=table,
                    started=arrival.monotonic, started_unix=arrival.unix, endpoint="count_tokens")
        async with RequestCount(caller.key, request_id) as limit_headers:  # a request, if not tokens or spend
            response = await count_tokens_call(call)
    except GatewayError as exc:
        return error_response("anthropic", exc, request_id)
    for name, value in limit_headers.items():
        response[name] = value
    return response


def _inbound_of(request: HttpRequest) -> Inbound:
    return "anthropic" if "anthropic-version" in request.headers else "openai"


def inbound_of_scope(scope: dict[str, Any]) -> Inbound:
    """The envelope a request's errors use, from its ASGI scope alone (before Django builds a request).

    The same answer ``not_found``, ``models`` and ``explain`` give: Anthropic's for ``/v1/messages...``, for a
    request carrying ``anthropic-version`` and for ``?shape=anthropic``; OpenAI's otherwise.
    """
    if scope.get("path", "").startswith("/v1/messages") or b"shape=anthropic" in scope.get("query_string", b""):
        return "anthropic"
    if any(name.lower() == b"anthropic-version" for name, _ in scope.get("headers", ())):
        return "anthropic"
    return "openai"


async def models(request: HttpRequest) -> HttpResponseBase:
    """GET /v1/models: the tier and category aliases, virtual models and models this key may use.

    A concrete model's entry carries its ``strengths`` (the tags of what it is good at) in both shapes;
    every entry lists the ``endpoints`` it serves (``chat``, ``embeddings``).
    """
    inbound = _inbound_of(request)
    table = current_table()
    try:
        key = caller_of(request, table).key
    except GatewayError as exc:
        return error_response(inbound, exc)
    names = [n for n in table.public_names() if key is None or key.allows(n)]
    created = int(time.time())
    if inbound == "anthropic":
        data: dict[str, Any] = {
            "data": [{"type": "model", "id": n, "display_name": n, "created_at": "1970-01-01T00:00:00Z",
                      "endpoints": _endpoints(n, table), **_strengths(n, table)} for n in names],
            "has_more": False, "first_id": names[0] if names else None, "last_id": names[-1] if names else None,
        }
    else:
        data = {"object": "list", "data": [
            {"id": n, "object": "model", "created": created, "owned_by": _owner(n, table),
             "endpoints": _endpoints(n, table), **_strengths(n, table)}
            for n in names]}
    return HttpResponse(_renderer.render(data), content_type="application/json")


def _owner(name: str, table: RoutingTable) -> str:
    kind = table.kind_of(name)
    if kind == "model":
        return table.models[name].provider
    if kind == "category":
        return "gomodel-category-route"
    return "gomodel-tier-route" if kind == "tier" else "gomodel-virtual-model"


def _endpoints(name: str, table: RoutingTable) -> list[str]:
    """The endpoints a name serves (``chat``, ``embeddings``), in the order of ENDPOINTS."""
    served = table.endpoints_of(name)
    return [endpoint for endpoint in ENDPOINTS if endpoint in served]


def _strengths(name: str, table: RoutingTable) -> dict[str, list[str]]:
    """``{"strengths": [...]}`` for a concrete model (its categories in the order of CATEGORIES, then its other
    tags in alphabetical order), nothing for other names."""
    model = table.models.get(name)
    if model is None:
        return {}
    return {"strengths": [tag for tag in known_strengths(model.strengths) if tag in model.strengths]}


async def explain(request: HttpRequest) -> HttpResponseBase:
    """POST /v1/routing/explain: the verdict and the candidate ranking for a body, without calling upstream.

    The body is a chat body (OpenAI's, or Anthropic's with ``?shape=anthropic``) or, with ``?endpoint=embeddings``
    or when it has no ``messages`` and its model serves embeddings, an embeddings body; with
    ``?endpoint=responses``, a Responses body.
    """
    inbound: Inbound = "anthropic" if request.GET.get("shape") == "anthropic" else _inbound_of(request)
    if request.method != "POST":
        return error_response(inbound, GatewayError(405, "Use POST for /v1/routing/explain.",
                                                    code="method_not_allowed"))
    request_id = random_id()
    try:
        if request.GET.get("endpoint") == "responses":  # a Responses body, explained as its chat equivalent
            call = await _prepare_responses(request, request_id)
        else:
            call = _prepare_explained(request, inbound, request_id)
        async with RequestCount(call.key, request_id) as limit_headers:  # counted as a request: no tokens, no spend
            data = await explain_call(call)
    except GatewayError as exc:
        return error_response(inbound, exc, request_id)
    response = HttpResponse(_renderer.render(data), content_type="application/json")
    for name, value in limit_headers.items():
        response[name] = value
    return response


def _prepare_explained(request: HttpRequest, inbound: Inbound, request_id: str) -> Call:
    """The Call an explanation is about: chat or embeddings, as ``explain`` says; the body is read once."""
    endpoint = request.GET.get("endpoint")
    if endpoint not in (None, "chat", "embeddings"):
        raise GatewayError(400, f"endpoint: expected chat, embeddings or responses, got {endpoint[:40]!r}.",
                           param="endpoint",
                           code="invalid_request", error_class="permanent")
    table = current_table()
    caller_of(request, table)  # an unknown caller learns nothing about its body
    body = _read_json(request)
    if endpoint is None:
        model = body.get("model")
        served = table.endpoints_of(model) if isinstance(model, str) else frozenset()
        endpoint = "embeddings" if "messages" not in body and served == {"embeddings"} else "chat"
    if endpoint == "embeddings":
        return _prepare_embeddings(request, request_id, body)
    return _prepare(request, inbound, request_id, body)


async def not_found(request: HttpRequest, path: str = "") -> HttpResponseBase:
    inbound = "anthropic" if request.path.startswith("/v1/messages") else _inbound_of(request)
    try:
        caller_of(request, current_table())  # which endpoints exist is no business of an unknown caller
    except GatewayError as exc:
        return error_response(inbound, exc)
    return error_response(inbound, GatewayError(404, f"Unknown endpoint {request.method} {request.path}.",
                                                code="unknown_endpoint"))


_openapi_cache: bytes | None = None


async def openapi(request: HttpRequest) -> HttpResponseBase:
    """GET /v1/openapi.json: the OpenAPI description of the client API."""
    global _openapi_cache
    if _openapi_cache is None:
        import pathlib

        import yaml

        spec = yaml.safe_load((pathlib.Path(__file__).parent / "openapi.yaml").read_text())
        _openapi_cache = _renderer.render(spec)
    return HttpResponse(_openapi_cache, content_type="application/json")
