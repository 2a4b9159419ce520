"""Cohere's error bodies (``{"id", "message"}``) are classified like the other providers' errors."""

from __future__ import annotations

import json

import pytest

from routing.core.error_classifier import classify_http_error


def cohere(message: str) -> bytes:
    return json.dumps({"id": "6a0d1f0c-6a4b-4d1e-9c3e-0b1f0d7f1a2b", "message": message}).encode()


@pytest.mark.parametrize(("status", "message", "error_class", "reason"), [
    (400, "too many tokens: the total number of tokens in the prompt cannot exceed 128000 - received 130000. "
          "Try using a shorter prompt, or enabling prompt truncating.", "incompatible", "context_overflow"),
    (400, "invalid request: message must be at least 1 token long", "permanent", "bad_request"),
    (401, "invalid api token", "incompatible", "auth"),
    (402, "Please add or update your payment method at https://dashboard.cohere.com/billing?tab=payment to "
          "continue", "incompatible", "quota"),
    (404, "model 'command-z' not found, make sure the correct model ID was used and that you have access to the "
          "model.", "incompatible", "not_found"),
    (429, "You are using a Trial key, which is limited to 20 API calls / minute.", "transient", "rate_limited"),
    (500, "internal server error, this has been reported to our developers", "transient", "server_error"),
])
def test_cohere_errors_are_classified(status: int, message: str, error_class: str, reason: str) -> None:
    outcome = classify_http_error(status, {}, cohere(message), "cohere")

    assert (str(outcome.error_class.value), outcome.reason) == (error_class, reason)


def test_a_cohere_429_honours_retry_after() -> None:
    outcome = classify_http_error(429, {"retry-after": "7"}, cohere("You are using a Trial key"), "cohere")

    assert outcome.retry_after_s == 7.0
