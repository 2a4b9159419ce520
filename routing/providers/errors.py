"""Errors raised by the adapters, and the error envelopes the gateway answers clients with.

The adapters raise only these::

    ProviderError
    ├── TranslationError        the request cannot be sent to this target as it is (a 400 for the client,
    │   │                       or a reason to try another target): raised BEFORE anything is sent
    │   ├── CapabilityError     the target cannot do something the request asks for (an image to a
    │   │                       text-only model, n>1 to Anthropic, audio to Anthropic, ...)
    │   └── RequestShapeError   the body cannot be translated (bad part type, missing field, bad JSON)
    └── MalformedResponse       the upstream answered 2xx but its envelope or stream cannot be understood

Every TranslationError carries ``param``: the JSON path of the offending field in the CLIENT's body, e.g.
``messages[2].content[0].image_url.url``, so the 400 names what to fix.

``client_error_body`` builds OpenAI's envelope ``{"error": {"message", "type", "param", "code"}}`` or
Anthropic's ``{"type": "error", "error": {"type", "message"}}``; the views and the engine both use it.
"""

from __future__ import annotations

from typing import Any, Literal

Inbound = Literal["openai", "anthropic"]


class ProviderError(Exception):
    """Base of everything the adapters raise on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TranslationError(ProviderError):
    """The request cannot go to this target; nothing was sent. ``status`` is what the client should see."""

    status = 400
    code = "invalid_request"

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class CapabilityError(TranslationError):
    """The target lacks ``capability`` (one of routing.core.table.CAPABILITIES, or a parameter name such as
    ``n`` or ``top_k`` when the target format has no equivalent for it)."""

    code = "unsupported_capability"

    def __init__(self, capability: str, message: str, param: str | None = None) -> None:
        super().__init__(message, param)
        self.capability = capability


class RequestShapeError(TranslationError):
    """The body is not something the translation understands (wrong type, missing field, bad JSON)."""

    code = "invalid_request_body"


class MalformedResponse(ProviderError):
    """The upstream's success envelope or stream could not be understood: an invalid response."""


# Status -> error type, per client shape. OpenAI documents few types; these are the ones its SDKs and
# most gateways use. Anthropic's come from its error reference.
_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    408: "timeout_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    502: "api_error",
    503: "api_error",
    504: "timeout_error",
}
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "invalid_request_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    502: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def error_type_for_status(inbound: Inbound, status: int) -> str:
    """The error ``type`` word a client of this shape expects for an HTTP status."""
    table = _ANTHROPIC_TYPES if inbound == "anthropic" else _OPENAI_TYPES
    if status in table:
        return table[status]
    if status >= 500:
        return "api_error"
    return "invalid_request_error"


def client_error_body(
    inbound: Inbound,
    status: int,
    message: str,
    type: str | None = None,  # the envelope's own word for the error kind
    code: str | None = None,
    param: str | None = None,
) -> dict[str, Any]:
    """The error body in the client's own envelope. ``type`` defaults to the usual word for ``status``.

    Anthropic's envelope has no ``code``/``param`` fields; ``param`` is appended to its message so the
    client still learns which field is wrong.
    """
    error_type = type or error_type_for_status(inbound, status)
    if inbound == "anthropic":
        text = f"{message} (param: {param})" if param and param not in message else message
        return {"type": "error", "error": {"type": error_type, "message": text}}
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def translation_error_body(inbound: Inbound, error: TranslationError) -> dict[str, Any]:
    """The 400 body for a request an adapter refused, in the client's envelope."""
    return client_error_body(inbound, error.status, error.message, code=error.code, param=error.param)
