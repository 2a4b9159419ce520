"""The client API: async Django views built from DRF's parser, authentication, exceptions and renderer.

DRF 3.18 has no async views, and a sync view under ASGI would buffer whole streams, so each endpoint is an
``async def`` that uses DRF's pieces directly. No database query, sync middleware or blocking call runs
here: keys and routes come from the in-memory RoutingTable.
"""

from __future__ import annotations

import io
import time
import uuid
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from rest_framework import exceptions as drf
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.parsers import JSONParser
from rest_framework.renderers import JSONRenderer

from routing.api.body_check import check_body
from routing.config.runtime import current_table
from routing.core.features import extract_features
from routing.core.table import KeySpec, RoutingTable
from routing.gateway import engine
from routing.gateway.explain import explain_call
from routing.gateway.gateway_error import GatewayError
from routing.gateway.records import Call
from routing.models import hash_secret
from routing.ops.startup import is_loopback
from routing.providers.errors import Inbound, client_error_body

_parser = JSONParser()
_renderer = JSONRenderer()


class GatewayKeyAuthentication(BaseAuthentication):
    """``Authorization: Bearer <key>`` or ``x-api-key: <key>`` against the table's hashed keys."""

    def authenticate(self, request: HttpRequest) -> tuple[KeySpec, str] | None:  # type: ignore[override]
        return self.authenticate_with(request, current_table())

    def authenticate_with(self, request: HttpRequest, table: RoutingTable) -> tuple[KeySpec, str] | None:
        token = _presented_key(request)
        if not table.keys_by_hash:
            if is_loopback(request.META.get("REMOTE_ADDR")):
                return None  # open mode: no key configured, loopback clients only
            raise drf.AuthenticationFailed(
                "No gateway key is configured, so this gateway only answers clients on its own machine. "
                "Set GOMODEL_MASTER_KEY or create a key in the admin."
            )
        if not token:
            raise drf.NotAuthenticated(
                "Missing gateway key: send it as `Authorization: Bearer <key>` or `x-api-key: <key>`."
            )
        key = table.keys_by_hash.get(hash_secret(token))
        if key is None or key.revoked:
            raise drf.AuthenticationFailed("Invalid gateway key.")
        if key.expires_at is not None and key.expires_at <= time.time():
            raise drf.AuthenticationFailed("This gateway key has expired.")
        return key, token

    def authenticate_header(self, request: HttpRequest) -> str:
        return 'Bearer realm="gomodel"'


_authentication = GatewayKeyAuthentication()


def _presented_key(request: HttpRequest) -> str:
    header = get_authorization_header(request).decode("latin-1").strip()
    if header[:7].lower() == "bearer ":
        return header[7:].strip()
    return request.headers.get("x-api-key", "").strip()


def error_response(inbound: Inbound, exc: GatewayError, request_id: str | None = None) -> HttpResponse:
    """The error in the client's envelope, with its status and headers (Retry-After, X-Request-Id, ...)."""
    body = client_error_body(inbound, exc.status, exc.message, type=exc.type, code=exc.code, param=exc.param)
    response = HttpResponse(_renderer.render(body), content_type="application/json", status=exc.status)
    for name, value in exc.headers.items():
        response[name] = value
    if request_id and "X-Request-Id" not in exc.headers:
        response["X-Request-Id"] = request_id
    return response


def _as_gateway_error(exc: drf.APIException) -> GatewayError:
    """DRF's exception classes carry the status; the message becomes the client's error message."""
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    codes = {401: "invalid_api_key", 403: "permission_denied", 415: "unsupported_media_type"}
    headers = {}
    if isinstance(exc, drf.NotAuthenticated | drf.AuthenticationFailed):
        headers["WWW-Authenticate"] = _authentication.authenticate_header(None)  # type: ignore[arg-type]
        exc.status_code = 401
    return GatewayError(exc.status_code, str(detail), code=codes.get(exc.status_code, "invalid_request"),
                        headers=headers, error_class="permanent")


def _read_json(request: HttpRequest) -> dict[str, Any]:
    length = request.META.get("CONTENT_LENGTH")
    limit = settings.GOMODEL_MAX_BODY_BYTES
    if length and length.isdigit() and int(length) > limit:
        raise GatewayError(413, f"The request body is larger than the limit of {limit} bytes.",
                           code="request_too_large", error_class="permanent")
    try:
        raw = request.body
    except RequestDataTooBig:
        raise GatewayError(413, f"The request body is larger than the limit of {limit} bytes.",
                           code="request_too_large", error_class="permanent") from None
    if len(raw) > limit:
        raise GatewayError(413, f"The request body is larger than the limit of {limit} bytes.",
                           code="request_too_large", error_class="permanent")
    if not raw.strip():
        raise GatewayError(400, "The request body is empty; send a JSON object.", code="invalid_json",
                           error_class="permanent")
    try:
        data = _parser.parse(io.BytesIO(raw), parser_context={"encoding": "utf-8"})
    except drf.ParseError as exc:
        raise GatewayError(400, f"The request body is not valid JSON: {str(exc.detail).split(' - ', 1)[-1]}",
                           code="invalid_json", error_class="permanent") from None
    if not isinstance(data, dict):
        raise GatewayError(400, "The request body must be a JSON object.", code="invalid_json",
                           error_class="permanent")
    return data


def _prepare(request: HttpRequest, inbound: Inbound, request_id: str) -> Call:
    table = current_table()
    try:
        auth = _authentication.authenticate_with(request, table)
    except drf.APIException as exc:
        raise _as_gateway_error(exc) from None
    body = _read_json(request)
    check_body(body, inbound)
    headers = {name.lower(): value for name, value in request.headers.items()}
    return Call(
        request_id=request_id,
        inbound=inbound,
        key=auth[0] if auth else None,
        body=body,
        features=extract_features(body, inbound),
        headers=headers,
        table=table,
    )


async def _proxy(request: HttpRequest, inbound: Inbound) -> HttpResponseBase:
    if request.method != "POST":
        return error_response(inbound, GatewayError(405, f"Use POST for {request.path}.", code="method_not_allowed"))
    request_id = uuid.uuid4().hex
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


def _inbound_of(request: HttpRequest) -> Inbound:
    return "anthropic" if "anthropic-version" in request.headers else "openai"


async def models(request: HttpRequest) -> HttpResponseBase:
    """GET /v1/models: the tier aliases, virtual models and models this key may use."""
    inbound = _inbound_of(request)
    table = current_table()
    try:
        auth = _authentication.authenticate_with(request, table)
    except drf.APIException as exc:
        return error_response(inbound, _as_gateway_error(exc))
    key = auth[0] if auth else None
    names = [n for n in table.public_names() if key is None or not key.allowed_models or n in key.allowed_models]
    created = int(time.time())
    if inbound == "anthropic":
        data: dict[str, Any] = {
            "data": [{"type": "model", "id": n, "display_name": n, "created_at": "1970-01-01T00:00:00Z"}
                     for n in names],
            "has_more": False, "first_id": names[0] if names else None, "last_id": names[-1] if names else None,
        }
    else:
        data = {"object": "list", "data": [
            {"id": n, "object": "model", "created": created, "owned_by": _owner(n, table)} for n in names]}
    return HttpResponse(_renderer.render(data), content_type="application/json")


def _owner(name: str, table: RoutingTable) -> str:
    kind = table.kind_of(name)
    if kind == "model":
        return table.models[name].provider
    return "gomodel-tier-route" if kind == "tier" else "gomodel-virtual-model"


async def explain(request: HttpRequest) -> HttpResponseBase:
    """POST /v1/routing/explain: the verdict and the candidate ranking for a body, without calling upstream."""
    inbound: Inbound = "anthropic" if request.GET.get("shape") == "anthropic" else _inbound_of(request)
    if request.method != "POST":
        return error_response(inbound, GatewayError(405, "Use POST for /v1/routing/explain.",
                                                    code="method_not_allowed"))
    request_id = uuid.uuid4().hex
    try:
        data = await explain_call(_prepare(request, inbound, request_id))
    except GatewayError as exc:
        return error_response(inbound, exc, request_id)
    return HttpResponse(_renderer.render(data), content_type="application/json")


async def not_found(request: HttpRequest, path: str = "") -> HttpResponseBase:
    inbound = "anthropic" if request.path.startswith("/v1/messages") else _inbound_of(request)
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
