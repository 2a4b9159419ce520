"""Error envelopes for clients, and reading the providers' own error bodies."""

from __future__ import annotations

import json

import anthropic
import httpx2
import openai
import pytest

from routing.providers import client_error_body, error_type_for_status, get_adapter


@pytest.mark.parametrize(
    ("status", "openai_type", "anthropic_type"),
    [
        (400, "invalid_request_error", "invalid_request_error"),
        (401, "authentication_error", "authentication_error"),
        (403, "permission_error", "permission_error"),
        (404, "invalid_request_error", "not_found_error"),
        (413, "invalid_request_error", "request_too_large"),
        (429, "rate_limit_error", "rate_limit_error"),
        (502, "api_error", "api_error"),
        (503, "api_error", "overloaded_error"),
        (504, "timeout_error", "timeout_error"),
        (500, "api_error", "api_error"),
        (418, "invalid_request_error", "invalid_request_error"),
    ],
)
def test_it_names_the_error_type_each_client_expects(status: int, openai_type: str, anthropic_type: str) -> None:
    assert error_type_for_status("openai", status) == openai_type
    assert error_type_for_status("anthropic", status) == anthropic_type


def test_the_openai_envelope() -> None:
    assert client_error_body("openai", 404, "model 'x' not found", code="model_not_found", param="model") == {
        "error": {"message": "model 'x' not found", "type": "invalid_request_error", "param": "model",
                  "code": "model_not_found"}}


def test_the_anthropic_envelope_names_the_param_in_the_message() -> None:
    assert client_error_body("anthropic", 400, "must be a string", param="messages[0].content") == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "must be a string (param: messages[0].content)"}}


@pytest.mark.parametrize("inbound", ["openai", "anthropic"])
def test_the_sdks_read_the_envelopes(inbound: str) -> None:
    body = client_error_body(inbound, 403, "model not allowed for this key")  # type: ignore[arg-type]

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(403, json=body)

    with httpx2.Client(transport=httpx2.MockTransport(handler)) as http:
        if inbound == "openai":
            with openai.OpenAI(api_key="k", base_url="http://gw.test/v1", http_client=http, max_retries=0) as oa, \
                    pytest.raises(openai.PermissionDeniedError) as raised:
                    oa.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
            assert raised.value.message.endswith("model not allowed for this key")
            assert raised.value.type == "permission_error"
            assert raised.value.body == body["error"]
        else:
            with anthropic.Anthropic(api_key="k", base_url="http://gw.test", http_client=http, max_retries=0) as an, \
                    pytest.raises(anthropic.PermissionDeniedError) as raised_an:
                    an.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
            assert raised_an.value.body == body


@pytest.mark.parametrize(
    ("kind", "status", "body", "message", "type_", "overflow"),
    [
        ("openai", 400, {"error": {"message": "This model's maximum context length is 128000 tokens.",
                                   "type": "invalid_request_error", "param": "messages",
                                   "code": "context_length_exceeded"}},
         "This model's maximum context length is 128000 tokens.", "invalid_request_error", True),
        ("anthropic", 400, {"type": "error", "error": {
            "type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}},
         "prompt is too long: 210000 tokens > 200000 maximum", "invalid_request_error", True),
        ("gemini", 400, {"error": {"code": 400, "message": "The input token count (1200000) exceeds the maximum "
                                   "number of tokens allowed (1048576).", "status": "INVALID_ARGUMENT"}},
         "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
         "INVALID_ARGUMENT", True),
        ("anthropic", 529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
         "Overloaded", "overloaded_error", False),
        ("openai", 429, {"error": "rate limited"}, "rate limited", "", False),
    ],
)
def test_it_reads_provider_error_bodies(kind: str, status: int, body: object, message: str, type_: str,
                                        overflow: bool) -> None:
    error = get_adapter(kind).parse_error(status=status, data=json.dumps(body).encode())
    assert (error.status, error.message, error.type) == (status, message, type_)
    assert error.is_context_overflow is overflow


def test_it_reads_a_non_json_error_body_as_text() -> None:
    error = get_adapter("openai").parse_error(status=502, data=b"<html>" + b"x" * 1000)
    assert error.message.startswith("<html>")
    assert len(error.message) == 500
