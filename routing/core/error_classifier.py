"""Error classification: an upstream status, error body or transport failure -> one AttemptOutcome.

The class decides the next step (see ``routing.core.retry``); the reason is a bounded word for metrics,
audit and the health model. The rules, in the order they are tried for a 4xx::

    quota      out of credit or quota, spend limit, billing       INCOMPATIBLE quota      (cool the target)
    auth       401, 403, authentication/permission errors,        INCOMPATIBLE auth       (cool the target)
               Gemini API_KEY_* reasons, FAILED_PRECONDITION
    not_found  404, 405, model_not_found, DeploymentNotFound      INCOMPATIBLE not_found  (cool the target)
    throttle   Bedrock's ThrottlingException, ServiceQuota-      TRANSIENT rate_limited
               ExceededException, ModelNotReadyException (the
               x-amzn-ErrorType header, whatever the status)
    429        rate limits; "Request too large for ..." (a        TRANSIENT rate_limited; INCOMPATIBLE
               request larger than the per-minute limit)          context_overflow
    content    the prompt tripped the provider's content filter   PERMANENT content_filter
    overflow   413, context_length_exceeded, "prompt is too       INCOMPATIBLE context_overflow
               long", "input token count ... exceeds", a max
               output larger than the model allows
    support    415, unsupported_parameter/value, "... is not      INCOMPATIBLE unsupported
               supported with this model"
    408/409/425, Bedrock's 424 ModelErrorException                TRANSIENT timeout / server_error
    any other 4xx: the client's request                           PERMANENT bad_request

5xx never looks at the body's wording (a proxy's HTML page says anything): 503, 529, ``overloaded_error``
and ``UNAVAILABLE`` are ``overloaded``; 504 and ``DEADLINE_EXCEEDED`` are ``timeout``; the rest are
``server_error``; 501 is INCOMPATIBLE ``unsupported``. A 3xx means the base URL is wrong: INCOMPATIBLE
``not_found``. A transport failure is classified by where it happened (``classify_exception``); a TLS handshake
that cannot succeed is INCOMPATIBLE ``tls_error``, a target fault like ``auth``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal

from routing.core.durations import parse_duration
from routing.core.outcome import AttemptOutcome, ErrorClass

ExceptionKind = Literal[
    "connect",
    "connect_timeout",
    "tls",
    "write_timeout",
    "read_timeout_before_first_byte",
    "read_timeout_mid_stream",
    "connection_lost_after_send",
    "protocol",
]

_EXCEPTION_CLASSES: Mapping[str, tuple[ErrorClass, str]] = {
    # Nothing reached the provider: safe to retry on the same route, nothing can have been billed.
    "connect": (ErrorClass.TRANSIENT, "connect_error"),
    "connect_timeout": (ErrorClass.TRANSIENT, "connect_error"),
    # Nothing was sent either, but the same handshake fails again (a certificate that fails verification, a
    # port without TLS, TLS files that do not load): this target's configuration is broken for every request,
    # like a refused key. Fall back, never retry it; the health model locks it out (TARGET_FAULT_REASONS).
    "tls": (ErrorClass.INCOMPATIBLE, "tls_error"),
    # The request body never arrived whole, so the provider cannot have acted on it.
    "write_timeout": (ErrorClass.TRANSIENT, "timeout"),
    # Sent, but no byte came back before the attempt's timeout: the "timeout before any byte".
    "read_timeout_before_first_byte": (ErrorClass.TRANSIENT, "timeout"),
    # The provider was generating (and billing) when we lost it.
    "read_timeout_mid_stream": (ErrorClass.AMBIGUOUS, "timeout"),
    "connection_lost_after_send": (ErrorClass.AMBIGUOUS, "connection_lost"),
    # Bytes arrived that are not HTTP: an answer we cannot use.
    "protocol": (ErrorClass.INVALID_RESPONSE, "malformed"),
}

_MAX_MESSAGE_CHARS = 2000  # error messages are matched, never stored; no need to scan a megabyte of HTML


@dataclass(frozen=True, slots=True)
class ErrorBodyFields:
    """The fields of a provider's error body the classifier reads, whatever the provider's shape.

    OpenAI and Azure: ``{"error": {"message", "type", "code", "param"}}``; Anthropic:
    ``{"type": "error", "error": {"type", "message", "details": {"error_code"}}}``; Gemini:
    ``{"error": {"code": 400, "message", "status": "INVALID_ARGUMENT", "details": [...]}}``, sometimes
    wrapped in a list; OpenAI-compatible servers: a top-level ``message`` or ``detail``.
    """

    type: str = ""  # OpenAI/Anthropic error.type
    code: str = ""  # OpenAI/Azure error.code, Anthropic error.details.error_code, Azure innererror.code
    status_name: str = ""  # Gemini's canonical status, e.g. RESOURCE_EXHAUSTED
    message: str = ""
    reasons: tuple[str, ...] = ()  # Gemini ErrorInfo reasons, e.g. API_KEY_INVALID
    retry_delay_s: float | None = None  # Gemini RetryInfo.retryDelay

    @property
    def codes(self) -> frozenset[str]:
        return frozenset(c.lower() for c in (self.type, self.code, self.status_name, *self.reasons) if c)


def parse_error_body(body: bytes | str | Mapping[str, Any] | list[Any] | None) -> ErrorBodyFields:
    """The recognisable fields of an error body; an empty ErrorBodyFields when there are none."""
    data: Any = body
    if isinstance(body, bytes | bytearray):
        data = body.decode("utf-8", errors="replace")
    if isinstance(data, str):
        text = data.strip()
        try:
            data = json.loads(text) if text[:1] in ("{", "[") else None
        except (ValueError, RecursionError):
            data = None
        if data is None:
            return ErrorBodyFields(message=text[:_MAX_MESSAGE_CHARS])
    if isinstance(data, list):
        data = data[0] if data and isinstance(data[0], Mapping) else None
    if not isinstance(data, Mapping):
        return ErrorBodyFields()
    error = data.get("error")
    if isinstance(error, str):
        return ErrorBodyFields(message=error[:_MAX_MESSAGE_CHARS])
    if not isinstance(error, Mapping):
        # OpenAI-compatible servers (vLLM, FastAPI apps) put the fields at the top level.
        error = data
    message = error.get("message", error.get("detail", ""))
    code = error.get("code")
    details = error.get("details")
    inner = error.get("innererror")
    detail_code = ""
    if isinstance(details, Mapping):  # Anthropic: {"error_code": "enforced_spend_limit_reached"}
        detail_code = _text(details.get("error_code"))
    if isinstance(inner, Mapping):  # Azure: {"code": "ResponsibleAIPolicyViolation", ...}
        detail_code = detail_code or _text(inner.get("code"))
    reasons: list[str] = []
    retry_delay: float | None = None
    if isinstance(details, list):  # Gemini google.rpc details
        for item in details:
            if not isinstance(item, Mapping):
                continue
            kind = _text(item.get("@type"))
            if kind.endswith("ErrorInfo") and item.get("reason"):
                reasons.append(_text(item.get("reason")))
            elif kind.endswith("RetryInfo"):
                retry_delay = parse_duration(_text(item.get("retryDelay")))
    return ErrorBodyFields(
        type=_text(error.get("type")),
        # Gemini's and some servers' numeric code repeats the HTTP status: only a word is a code.
        code=detail_code or (code if isinstance(code, str) and not code.isdigit() else ""),
        status_name=_text(error.get("status")),
        message=_text(message)[:_MAX_MESSAGE_CHARS],
        reasons=tuple(reasons),
        retry_delay_s=retry_delay,
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


_QUOTA_CODES = frozenset(
    {
        "insufficient_quota",
        "billing_error",
        "billing_hard_limit_reached",
        "billing_not_active",
        "enforced_spend_limit_reached",
        "quotaexceeded",  # Azure: the subscription's quota, not a per-minute limit
    }
)
_QUOTA_MESSAGE = re.compile(
    r"credit balance is too low|spend(ing)? limit|billing (hard )?limit|purchase credits|"
    r"insufficient (funds|credits|balance)|exceeded your current quota",
    re.IGNORECASE,
)
_AUTH_CODES = frozenset(
    {
        "authentication_error",
        "permission_error",
        "invalid_api_key",
        "unauthenticated",
        "permission_denied",
        "failed_precondition",  # Gemini: billing not enabled, or the API is not offered in our region
        "api_key_invalid",
        "api_key_expired",
        "api_key_service_blocked",
        "unsupported_country_region_territory",
        "accessdenied",
    }
)
_NOT_FOUND_CODES = frozenset(
    {"model_not_found", "not_found_error", "not_found", "deploymentnotfound", "deployment_not_found"}
)
_CONTENT_FILTER_CODES = frozenset(
    {"content_filter", "content_policy_violation", "responsibleaipolicyviolation"}
)
_OVERFLOW_CODES = frozenset({"context_length_exceeded", "request_too_large", "string_above_max_length"})
_OVERFLOW_MESSAGE = re.compile(
    r"maximum context length|context (length|window|limit)|prompt is too long|"
    r"input token count .{0,40}exceeds|exceeds? the maximum number of tokens|too many (input )?tokens|"
    r"input is too long|reduce the length of the (messages|prompt)|"
    # the requested max output does not fit this model (OpenAI, Anthropic wordings)
    r"max_tokens is too large|supports at most \d+ (completion|output) tokens|"
    r"maximum allowed number of output tokens",
    re.IGNORECASE,
)
_UNSUPPORTED_CODES = frozenset({"unsupported_parameter", "unsupported_value", "operationnotsupported"})
_UNSUPPORTED_MESSAGE = re.compile(
    r"\bnot supported\b|\bunsupported\b|does not support|doesn't support|is only supported by|"
    r"only supported (for|by|with)|is not enabled for|not available for this model|not compatible with",
    re.IGNORECASE,
)
# Bedrock's exception names (x-amzn-ErrorType): AccessDenied (403), ResourceNotFound (404), Validation (400) and
# ServiceUnavailable (503) fall under the status rules; these need their own.
_AWS_THROTTLING_CODES = frozenset({"throttlingexception", "servicequotaexceededexception", "modelnotreadyexception"})
_AWS_MODEL_ERROR_CODES = frozenset({"modelerrorexception", "modelstreamerrorexception"})
_TOO_LARGE_FOR_RATE = re.compile(r"request too large for", re.IGNORECASE)
_OVERLOADED_CODES = frozenset({"overloaded_error", "unavailable", "overloaded"})
_TIMEOUT_CODES = frozenset({"timeout_error", "deadline_exceeded"})


def classify_http_error(
    status: int,
    headers: Mapping[str, str],
    body: bytes | str | Mapping[str, Any] | list[Any] | None,
    provider_kind: str,
    *,
    latency_s: float = 0.0,
    now_unix: float | None = None,
) -> AttemptOutcome:
    """The outcome of an attempt the provider answered with a non-2xx status.

    The body rules match fields each provider documents and that never mean different things across
    providers, so they apply whatever the kind; ``provider_kind`` (one of ``routing.core.table.
    PROVIDER_KINDS``; anything else is read as OpenAI-compatible) picks the provider's own rate-limit
    headers. ``now_unix`` is the wall clock, needed only for Retry-After dates and Anthropic's reset times.
    ``retry_after_s`` is set for every class: the policy uses it to time a same-route retry, the health
    model to time a cooldown.
    """
    if status < 300:
        raise ValueError(f"classify_http_error called with success status {status}")
    error = parse_error_body(body)
    if provider_kind == "bedrock":
        error = with_aws_error_type(error, headers)
    error_class, reason = _classify(status, error)
    retry_after = retry_after_seconds(
        headers,
        status=status,
        provider_kind=provider_kind,
        now_unix=now_unix,
        body_delay_s=error.retry_delay_s,
    )
    return AttemptOutcome.failure(
        error_class, reason, status=status, latency_s=latency_s, retry_after_s=retry_after
    )


def with_aws_error_type(error: ErrorBodyFields, headers: Mapping[str, str]) -> ErrorBodyFields:
    """Bedrock's error body is ``{"message"}`` alone; the exception's name is the ``x-amzn-ErrorType`` header
    (``ThrottlingException:http://internal.amazon.com/coral/...``), read here as the error's type."""
    for name, value in headers.items():
        if name.lower() == "x-amzn-errortype":
            return replace(error, type=value.partition(":")[0].strip())
    return error


def classify_exception(kind: ExceptionKind, *, latency_s: float = 0.0) -> AttemptOutcome:
    """The outcome of an attempt that failed in transport, by where in the exchange it failed."""
    try:
        error_class, reason = _EXCEPTION_CLASSES[kind]
    except KeyError:
        raise ValueError(f"unknown transport failure kind {kind!r}") from None
    return AttemptOutcome.failure(error_class, reason, latency_s=latency_s)


def _classify(status: int, error: ErrorBodyFields) -> tuple[ErrorClass, str]:
    if status < 400:
        return ErrorClass.INCOMPATIBLE, "not_found"  # a redirect we do not follow: the base URL is wrong
    if status >= 500:
        return _classify_server_error(status, error)
    codes = error.codes
    if codes & _QUOTA_CODES or status == 402 or (status != 429 and _QUOTA_MESSAGE.search(error.message)):
        return ErrorClass.INCOMPATIBLE, "quota"
    if status in (401, 403) or codes & _AUTH_CODES:
        return ErrorClass.INCOMPATIBLE, "auth"
    if status in (404, 405) or codes & _NOT_FOUND_CODES:
        return ErrorClass.INCOMPATIBLE, "not_found"
    if codes & _AWS_THROTTLING_CODES:  # Bedrock: a quota per minute, or a model not yet ready (400 or 429)
        return ErrorClass.TRANSIENT, "rate_limited"
    if status == 429:
        if _TOO_LARGE_FOR_RATE.search(error.message):
            # OpenAI: the request alone is larger than the per-minute token limit. Waiting cannot help.
            return ErrorClass.INCOMPATIBLE, "context_overflow"
        return ErrorClass.TRANSIENT, "rate_limited"
    if codes & _CONTENT_FILTER_CODES:
        return ErrorClass.PERMANENT, "content_filter"
    if status == 413 or codes & _OVERFLOW_CODES or _OVERFLOW_MESSAGE.search(error.message):
        return ErrorClass.INCOMPATIBLE, "context_overflow"
    if status == 415 or codes & _UNSUPPORTED_CODES or _UNSUPPORTED_MESSAGE.search(error.message):
        return ErrorClass.INCOMPATIBLE, "unsupported"
    if status == 408:
        return ErrorClass.TRANSIENT, "timeout"
    if status in (409, 425) or codes & _AWS_MODEL_ERROR_CODES:
        # Anthropic's conflict_error and "too early" both ask for a later retry; Bedrock's 424 ModelErrorException
        # is the model failing on a valid request.
        return ErrorClass.TRANSIENT, "server_error"
    return ErrorClass.PERMANENT, "bad_request"


def _classify_server_error(status: int, error: ErrorBodyFields) -> tuple[ErrorClass, str]:
    codes = error.codes
    if status == 501:
        return ErrorClass.INCOMPATIBLE, "unsupported"
    if status in (503, 529) or codes & _OVERLOADED_CODES:
        return ErrorClass.TRANSIENT, "overloaded"
    if status == 504 or codes & _TIMEOUT_CODES:
        return ErrorClass.TRANSIENT, "timeout"
    return ErrorClass.TRANSIENT, "server_error"


# --------------------------------------------------------------------------------------------------------
# Retry-After
# --------------------------------------------------------------------------------------------------------

def retry_after_seconds(
    headers: Mapping[str, str],
    *,
    status: int,
    provider_kind: str = "openai",
    now_unix: float | None = None,
    body_delay_s: float | None = None,
) -> float | None:
    """How long the provider asked us to wait, in seconds (>= 0), or None when it did not say.

    Precedence: ``retry-after-ms`` (OpenAI, Azure), ``retry-after`` in seconds or as an HTTP date (needs
    ``now_unix``), a delay in the body (Gemini's RetryInfo); then, only for a 429 without any of those, the
    provider's rate-limit reset headers for the limits whose remaining count is 0, taking the longest (the
    request needs every exhausted limit to have reset): OpenAI's ``x-ratelimit-reset-{requests,tokens}``
    (durations such as ``6m0s``) or Anthropic's ``anthropic-ratelimit-*-reset`` (RFC 3339 times, which need
    ``now_unix``).
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    value = _number(lowered.get("retry-after-ms"))
    if value is not None:
        return max(0.0, value / 1000.0)
    raw = lowered.get("retry-after")
    if raw is not None:
        value = _number(raw)
        if value is not None:
            return max(0.0, value)
        if now_unix is not None:
            when = _http_date(raw)
            if when is not None:
                return max(0.0, when - now_unix)
    if body_delay_s is not None:
        return max(0.0, body_delay_s)
    if status != 429:
        return None
    if provider_kind == "anthropic":
        resets = _anthropic_resets(lowered, now_unix)
    else:
        resets = [
            parse_duration(lowered.get(f"x-ratelimit-reset-{limit}", ""))
            for limit in ("requests", "tokens")
            if lowered.get(f"x-ratelimit-remaining-{limit}", "").strip() == "0"
        ]
    known = [r for r in resets if r is not None]
    return max(0.0, max(known)) if known else None


_ANTHROPIC_LIMITS = ("requests", "tokens", "input-tokens", "output-tokens")


def _anthropic_resets(headers: Mapping[str, str], now_unix: float | None) -> list[float | None]:
    if now_unix is None:
        return []
    resets: list[float | None] = []
    for limit in _ANTHROPIC_LIMITS:
        if headers.get(f"anthropic-ratelimit-{limit}-remaining", "").strip() != "0":
            continue
        raw = headers.get(f"anthropic-ratelimit-{limit}-reset", "").strip()
        try:
            when = datetime.fromisoformat(raw)
        except ValueError:
            resets.append(None)
            continue
        resets.append(when.timestamp() - now_unix if when.tzinfo is not None else None)
    return resets


def _http_date(raw: str) -> float | None:
    try:
        when = parsedate_to_datetime(raw.strip())
    except (TypeError, ValueError, IndexError):
        return None
    return when.timestamp() if when.tzinfo is not None else None


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None
