"""Error classification: real provider error bodies, statuses and transport failures -> class and reason."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

import pytest

from routing.core.error_classifier import (
    classify_exception,
    classify_http_error,
    parse_error_body,
    retry_after_seconds,
)
from routing.core.outcome import AttemptOutcome, ErrorClass

P, T, INC, A, V = (
    ErrorClass.PERMANENT,
    ErrorClass.TRANSIENT,
    ErrorClass.INCOMPATIBLE,
    ErrorClass.AMBIGUOUS,
    ErrorClass.INVALID_RESPONSE,
)


def openai(message: str, type_: str | None, code: str | None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def anthropic(type_: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"type": "error", "error": {"type": type_, "message": message, **extra}, "request_id": "req_011"}


def gemini(code: int, status: str, message: str, details: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details is not None:
        error["details"] = details
    return {"error": error}


# (provider kind, status, body, expected class, expected reason)
CASES: list[tuple[str, str, int, Any, ErrorClass, str]] = [
    # ---- OpenAI
    ("openai context overflow", "openai", 400, openai(
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 "
        "tokens. Please reduce the length of the messages.", "invalid_request_error", "context_length_exceeded",
        "messages"), INC, "context_overflow"),
    ("openai unsupported parameter", "openai", 400, openai(
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' "
        "instead.", "invalid_request_error", "unsupported_parameter", "max_tokens"), INC, "unsupported"),
    ("openai unsupported value", "openai", 400, openai(
        "Unsupported value: 'temperature' does not support 0.2 with this model. Only the default (1) value is "
        "supported.", "invalid_request_error", "unsupported_value", "temperature"), INC, "unsupported"),
    ("openai image to a text model", "openai", 400, openai(
        "Invalid content type. image_url is only supported by certain models.", "invalid_request_error", None,
        "messages.[0].content.[1].type"), INC, "unsupported"),
    ("openai max_tokens above the model's", "openai", 400, openai(
        "max_tokens is too large: 100000. This model supports at most 16384 completion tokens, whereas you "
        "provided 100000.", "invalid_request_error", "invalid_value", "max_tokens"), INC, "context_overflow"),
    ("openai client's bad request", "openai", 400, openai(
        "Invalid value for 'content': expected a string, got null.", "invalid_request_error", None,
        "messages.[0].content"), P, "bad_request"),
    ("openai unparseable body", "openai", 400, openai(
        "We could not parse the JSON body of your request.", "invalid_request_error", None), P, "bad_request"),
    ("openai bad key", "openai", 401, openai(
        "Incorrect API key provided: sk-abc***. You can find your API key at "
        "https://platform.openai.com/account/api-keys.", "invalid_request_error", "invalid_api_key"), INC, "auth"),
    ("openai region", "openai", 403, openai(
        "Country, region, or territory not supported", "request_forbidden",
        "unsupported_country_region_territory"), INC, "auth"),
    ("openai model not found", "openai", 404, openai(
        "The model `gpt-9` does not exist or you do not have access to it.", "invalid_request_error",
        "model_not_found"), INC, "not_found"),
    ("openai rate limit", "openai", 429, openai(
        "Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Used 29000, "
        "Requested 2000. Please try again in 2s.", "tokens", "rate_limit_exceeded"), T, "rate_limited"),
    ("openai request bigger than the TPM limit", "openai", 429, openai(
        "Request too large for gpt-4 in organization org-x on tokens per min (TPM): Limit 10000, Requested "
        "24000.", "tokens", "rate_limit_exceeded"), INC, "context_overflow"),
    ("openai out of quota", "openai", 429, openai(
        "You exceeded your current quota, please check your plan and billing details.", "insufficient_quota",
        "insufficient_quota"), INC, "quota"),
    ("openai server error", "openai", 500, openai(
        "The server had an error while processing your request. Sorry about that!", "server_error", None),
        T, "server_error"),
    ("openai engine overloaded", "openai", 503, openai(
        "The engine is currently overloaded, please try again later", "server_error", None), T, "overloaded"),
    # ---- Anthropic
    ("anthropic prompt too long", "anthropic", 400, anthropic(
        "invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"), INC, "context_overflow"),
    ("anthropic input + max_tokens over the limit", "anthropic", 400, anthropic(
        "invalid_request_error", "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000, "
        "decrease input length or `max_tokens` and try again"), INC, "context_overflow"),
    ("anthropic max_tokens over the model's", "anthropic", 400, anthropic(
        "invalid_request_error", "max_tokens: 100000 > 64000, which is the maximum allowed number of output "
        "tokens for claude-sonnet-4-5"), INC, "context_overflow"),
    ("anthropic client's bad request", "anthropic", 400, anthropic(
        "invalid_request_error", "messages: roles must alternate between \"user\" and \"assistant\""),
        P, "bad_request"),
    ("anthropic credit balance", "anthropic", 400, anthropic(
        "invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to "
        "Plans & Billing to upgrade or purchase credits."), INC, "quota"),
    ("anthropic billing error", "anthropic", 402, anthropic("billing_error", "Billing issue"), INC, "quota"),
    ("anthropic spend limit as a 429", "anthropic", 429, anthropic(
        "rate_limit_error", "You have reached your specified API usage limits.",
        details={"error_code": "enforced_spend_limit_reached"}), INC, "quota"),
    ("anthropic authentication", "anthropic", 401, anthropic(
        "authentication_error", "invalid x-api-key"), INC, "auth"),
    ("anthropic permission", "anthropic", 403, anthropic(
        "permission_error", "Your API key does not have permission to use the specified resource."), INC, "auth"),
    ("anthropic unknown model", "anthropic", 404, anthropic(
        "not_found_error", "model: claude-9-opus"), INC, "not_found"),
    ("anthropic request too large", "anthropic", 413, anthropic(
        "request_too_large", "Request exceeds the maximum allowed number of bytes."), INC, "context_overflow"),
    ("anthropic rate limit", "anthropic", 429, anthropic(
        "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"), T, "rate_limited"),
    ("anthropic api error", "anthropic", 500, anthropic("api_error", "Internal server error"), T, "server_error"),
    ("anthropic timeout", "anthropic", 504, anthropic("timeout_error", "Request timed out"), T, "timeout"),
    ("anthropic overloaded", "anthropic", 529, anthropic("overloaded_error", "Overloaded"), T, "overloaded"),
    ("anthropic conflict", "anthropic", 409, anthropic("conflict_error", "Conflict"), T, "server_error"),
    # ---- Gemini
    ("gemini token limit", "gemini", 400, gemini(
        400, "INVALID_ARGUMENT", "The input token count (1212345) exceeds the maximum number of tokens allowed "
        "(1048576)."), INC, "context_overflow"),
    ("gemini bad key", "gemini", 400, gemini(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid "
        "API key.", [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                      "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}}]),
        INC, "auth"),
    ("gemini function calling not enabled", "gemini", 400, gemini(
        400, "INVALID_ARGUMENT", "Function calling is not enabled for models/gemini-1.0-pro-vision"),
        INC, "unsupported"),
    ("gemini client's bad request", "gemini", 400, gemini(
        400, "INVALID_ARGUMENT", "Request contains an invalid argument."), P, "bad_request"),
    ("gemini region / billing", "gemini", 400, gemini(
        400, "FAILED_PRECONDITION", "User location is not supported for the API use."), INC, "auth"),
    ("gemini permission", "gemini", 403, gemini(
        403, "PERMISSION_DENIED", "Your API key doesn't have the required permissions."), INC, "auth"),
    ("gemini unknown model", "gemini", 404, gemini(
        404, "NOT_FOUND", "models/gemini-9 is not found for API version v1beta, or is not supported for "
        "generateContent."), INC, "not_found"),
    ("gemini resource exhausted", "gemini", 429, gemini(
        429, "RESOURCE_EXHAUSTED", "You exceeded your current quota, please check your plan and billing "
        "details.", [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "32s"}]),
        T, "rate_limited"),
    ("gemini internal", "gemini", 500, gemini(500, "INTERNAL", "An internal error has occurred."),
        T, "server_error"),
    ("gemini unavailable", "gemini", 503, gemini(
        503, "UNAVAILABLE", "The model is overloaded. Please try again later."), T, "overloaded"),
    ("gemini deadline", "gemini", 504, gemini(504, "DEADLINE_EXCEEDED", "Deadline expired."), T, "timeout"),
    ("gemini streaming error list", "gemini", 429, [gemini(429, "RESOURCE_EXHAUSTED", "Quota exceeded.")],
        T, "rate_limited"),
    # ---- Azure OpenAI
    ("azure content filter", "azure_openai", 400, {"error": {
        "message": "The response was filtered due to the prompt triggering Azure OpenAI's content management "
        "policy.", "type": None, "param": "prompt", "code": "content_filter", "status": 400,
        "innererror": {"code": "ResponsibleAIPolicyViolation", "content_filter_result": {
            "hate": {"filtered": True, "severity": "high"}}}}}, P, "content_filter"),
    ("azure context overflow", "azure_openai", 400, {"error": {
        "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 "
        "tokens.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}},
        INC, "context_overflow"),
    ("azure deployment not found", "azure_openai", 404, {"error": {
        "code": "DeploymentNotFound", "message": "The API deployment for this resource does not exist."}},
        INC, "not_found"),
    ("azure bad key", "azure_openai", 401, {"error": {
        "code": "401", "message": "Access denied due to invalid subscription key or wrong API endpoint."}},
        INC, "auth"),
    ("azure rate limit", "azure_openai", 429, {"error": {
        "code": "429", "message": "Requests to the ChatCompletions_Create Operation under Azure OpenAI API "
        "version 2024-02-01 have exceeded token rate limit of your current OpenAI S0 pricing tier."}},
        T, "rate_limited"),
    ("azure operation not supported", "azure_openai", 400, {"error": {
        "code": "OperationNotSupported", "message": "The chatCompletion operation does not work with the "
        "specified model, text-embedding-ada-002."}}, INC, "unsupported"),
    # ---- Bodies that are not JSON, and bare statuses
    ("proxy html 502", "openai", 502, b"<html><body>502 Bad Gateway</body></html>", T, "server_error"),
    ("html 400 that says unsupported is still read", "openai", 400, "unsupported media", INC, "unsupported"),
    ("empty 408", "openai", 408, None, T, "timeout"),
    ("empty 415", "openai", 415, b"", INC, "unsupported"),
    ("empty 422", "openai", 422, b"", P, "bad_request"),
    ("empty 501", "openai", 501, None, INC, "unsupported"),
    ("redirect", "openai", 301, None, INC, "not_found"),
    ("method not allowed: wrong base URL", "openai", 405, None, INC, "not_found"),
    ("5xx body wording is ignored", "openai", 500, openai("context length exceeded", None, None),
        T, "server_error"),
]


@pytest.mark.parametrize(
    ("kind", "status", "body", "error_class", "reason"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_it_classifies_real_provider_errors(
    kind: str, status: int, body: Any, error_class: ErrorClass, reason: str
) -> None:
    outcome = classify_http_error(status, {}, body, kind, latency_s=0.25)
    assert (outcome.error_class, outcome.reason) == (error_class, reason)
    assert outcome.ok is False
    assert outcome.status == status
    assert outcome.latency_s == 0.25


@pytest.mark.parametrize("encode", [lambda b: b, json.dumps, lambda b: json.dumps(b).encode()])
def test_it_reads_the_same_body_as_a_mapping_text_or_bytes(encode: Any) -> None:
    body = anthropic("invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum")
    outcome = classify_http_error(400, {}, encode(body), "anthropic")
    assert outcome.reason == "context_overflow"


def test_it_never_cools_a_target_for_the_clients_bad_request() -> None:
    outcome = classify_http_error(400, {}, openai("Invalid value", "invalid_request_error", None), "openai")
    assert outcome.error_class is ErrorClass.PERMANENT
    assert outcome.punishes_target is False


def test_it_tells_a_broken_target_from_a_request_that_does_not_fit() -> None:
    auth = classify_http_error(401, {}, anthropic("authentication_error", "invalid x-api-key"), "anthropic")
    overflow = classify_http_error(400, {}, anthropic("invalid_request_error", "prompt is too long"), "anthropic")
    assert auth.error_class is overflow.error_class is ErrorClass.INCOMPATIBLE
    assert auth.punishes_target is True
    assert overflow.punishes_target is False


def test_it_refuses_to_classify_a_success() -> None:
    with pytest.raises(ValueError):
        classify_http_error(200, {}, None, "openai")


EXCEPTIONS = [
    ("connect", T, "connect_error"),
    ("connect_timeout", T, "connect_error"),
    ("write_timeout", T, "timeout"),
    ("read_timeout_before_first_byte", T, "timeout"),
    ("read_timeout_mid_stream", A, "timeout"),
    ("connection_lost_after_send", A, "connection_lost"),
    ("protocol", V, "malformed"),
]


@pytest.mark.parametrize(("kind", "error_class", "reason"), EXCEPTIONS)
def test_it_classifies_transport_failures_by_where_they_happened(
    kind: Any, error_class: ErrorClass, reason: str
) -> None:
    outcome = classify_exception(kind, latency_s=1.5)
    assert (outcome.error_class, outcome.reason, outcome.latency_s) == (error_class, reason, 1.5)


def test_it_records_an_ambiguous_failure_as_unknown_not_failed() -> None:
    assert classify_exception("connection_lost_after_send").result == "unknown"
    assert classify_exception("connect").result == "failed"
    assert AttemptOutcome.success(0.1).result == "ok"


def test_it_rejects_an_unknown_transport_failure_kind() -> None:
    with pytest.raises(ValueError):
        classify_exception("meteor")  # type: ignore[arg-type]


# ---- Retry-After

NOW = 1_760_000_000.0


@pytest.mark.parametrize(
    ("headers", "status", "kind", "expected"),
    [
        ({"Retry-After": "7"}, 429, "openai", 7.0),
        ({"retry-after": "1.5"}, 503, "openai", 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 429, "azure_openai", 0.25),
        ({"Retry-After": format_datetime(datetime.fromtimestamp(NOW + 30, UTC), usegmt=True)}, 503, "openai", 30.0),
        ({"Retry-After": format_datetime(datetime.fromtimestamp(NOW - 30, UTC), usegmt=True)}, 503, "openai", 0.0),
        ({"Retry-After": "-4"}, 429, "openai", 0.0),
        ({"Retry-After": "soon"}, 429, "openai", None),
        ({"Retry-After": "nan"}, 429, "openai", None),
        ({}, 429, "openai", None),
        # OpenAI without Retry-After: the reset of every exhausted limit, the longest one.
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s",
          "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6m0s"}, 429, "openai", 360.0),
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "20ms",
          "x-ratelimit-remaining-tokens": "5000", "x-ratelimit-reset-tokens": "6m0s"}, 429, "openai", 0.02),
        ({"x-ratelimit-remaining-requests": "12", "x-ratelimit-reset-requests": "1s"}, 429, "openai", None),
        # ... and only for a 429.
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s"}, 503, "openai", None),
        # Anthropic's reset headers are RFC 3339 times.
        ({"anthropic-ratelimit-requests-remaining": "0",
          "anthropic-ratelimit-requests-reset": datetime.fromtimestamp(NOW + 12, UTC).isoformat()},
         429, "anthropic", 12.0),
        ({"anthropic-ratelimit-input-tokens-remaining": "0",
          "anthropic-ratelimit-input-tokens-reset": "garbage"}, 429, "anthropic", None),
    ],
)
def test_it_reads_retry_after_in_every_form(
    headers: dict[str, str], status: int, kind: str, expected: float | None
) -> None:
    value = retry_after_seconds(headers, status=status, provider_kind=kind, now_unix=NOW)
    if expected is None:
        assert value is None
    else:
        assert value == pytest.approx(expected, abs=1e-6)


def test_it_ignores_an_http_date_without_a_wall_clock() -> None:
    date = format_datetime(datetime.fromtimestamp(NOW + 30, UTC), usegmt=True)
    assert retry_after_seconds({"Retry-After": date}, status=429) is None


def test_it_takes_geminis_retry_delay_from_the_body() -> None:
    body = gemini(429, "RESOURCE_EXHAUSTED", "Quota exceeded.", [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "32.5s"},
    ])
    assert classify_http_error(429, {}, body, "gemini").retry_after_s == 32.5
    # A header, when present, still wins over the body.
    assert classify_http_error(429, {"retry-after": "3"}, body, "gemini").retry_after_s == 3.0


def test_it_keeps_retry_after_for_the_health_model_on_every_class() -> None:
    body = openai("You exceeded your current quota", "insufficient_quota", "insufficient_quota")
    outcome = classify_http_error(429, {"retry-after": "60"}, body, "openai")
    assert (outcome.error_class, outcome.retry_after_s) == (ErrorClass.INCOMPATIBLE, 60.0)


def test_it_reads_openai_compatible_top_level_errors() -> None:
    vllm = {"object": "error", "message": "This model's maximum context length is 4096 tokens.",
            "type": "BadRequestError", "param": None, "code": 400}
    error = parse_error_body(vllm)
    assert (error.type, error.code) == ("BadRequestError", "")
    assert classify_http_error(400, {}, vllm, "openai").reason == "context_overflow"


def test_it_caps_the_message_it_scans() -> None:
    error = parse_error_body("x" * 100_000)
    assert len(error.message) == 2000
