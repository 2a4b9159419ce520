"""The log filter masks provider keys, Azure's prefix-less 32-hex keys included, and keeps request ids readable."""

from __future__ import annotations

import logging
import sys
import uuid

import pytest

from routing.ops.log_redaction import RedactSecretsFilter, redact

# Assembled so that the source itself holds nothing key-shaped. An Azure key is 32 random hex digits; this one
# is not shaped like a version-4 UUID (its 13th digit is not 4).
AZURE_KEY = "3f9a" + "c2e1" + "7b6d" + "0e5f" + "a1b2" + "c3d4" + "e5f6" + "0718"
OPENAI_KEY = "sk-" + "proj-" + "Abcdefghijklmnop0123456789"
GOOGLE_KEY = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUv"
AZURE_NEW_KEY = "9Xr2" + "Lk8vQ1" * 13 + "AB"  # newer Azure resources: 84 characters, no prefix
AWS_SECRET = "wJal" + "rXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"  # 40 characters, no prefix


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"sending with headers {{'api-key': '{AZURE_KEY}', 'Content-Type': 'application/json'}}", AZURE_KEY),
        (f"api-key: {AZURE_KEY}", AZURE_KEY),
        (f"Ocp-Apim-Subscription-Key: {AZURE_KEY}", AZURE_KEY),
        (f'{{"api_key":"{AZURE_KEY}"}}', AZURE_KEY),
        (f"x-api-key={AZURE_KEY}", AZURE_KEY),
        (f"api-key: {AZURE_NEW_KEY}", AZURE_NEW_KEY),
        (f"GET https://generativelanguage.googleapis.com/v1beta/models?key={GOOGLE_KEY}&alt=sse", GOOGLE_KEY),
        (f"upstream refused key {AZURE_KEY} with 401", AZURE_KEY),  # bare, out of any context
        (f"upstream refused key {AZURE_KEY.upper()}", AZURE_KEY.upper()),
        (f"Authorization: Bearer {OPENAI_KEY}", OPENAI_KEY),
        (f"key {OPENAI_KEY} refused", OPENAI_KEY),
        (f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET),
        (f"{{'X-Amz-Security-Token': '{AWS_SECRET}'}}", AWS_SECRET),
        (f"AWS_SESSION_TOKEN={AWS_SECRET}", AWS_SECRET),
    ],
)
def test_it_masks_provider_keys(text: str, secret: str) -> None:
    cleaned = redact(text)
    assert secret not in cleaned
    assert secret[4:12] not in cleaned
    assert "…[redacted]" in cleaned


def test_it_keeps_the_name_and_the_first_characters_of_a_masked_key() -> None:
    assert redact(f"api-key: {AZURE_KEY}") == f"api-key: {AZURE_KEY[:4]}…[redacted]"
    assert redact(f"'api-key': '{AZURE_KEY}'") == f"'api-key': '{AZURE_KEY[:4]}…[redacted]'"


@pytest.mark.parametrize(
    "text",
    [
        f"request {uuid.uuid4().hex} answered 200 in 41 ms",
        f"attempt_id={uuid.uuid4().hex} target=openai/gpt-5",
        f"X-Request-Id: {uuid.uuid4().hex}",
        f"upstream answer id chatcmpl-{uuid.uuid4().hex}",
        f"session {uuid.uuid4()} pinned to hard",
        "prompt sha256 " + "ab" * 32,
        "prompt_cache_key=customer-4711-onboarding-flow",
        "Idempotency-Key: order-2026-12-01-000000001",
        "api-key: short",
        "model gpt-4o-mini-2024-07-18 took 120ms",
    ],
)
def test_it_leaves_request_ids_and_other_values_readable(text: str) -> None:
    assert redact(text) == text


def test_many_uuid4_request_ids_stay_readable() -> None:
    ids = " ".join(uuid.uuid4().hex for _ in range(500))
    assert redact(ids) == ids


def test_the_filter_scrubs_formatted_arguments_and_tracebacks() -> None:
    record = logging.LogRecord("gomodel", logging.WARNING, __file__, 1, "headers %s", ({"api-key": AZURE_KEY},), None)
    try:
        raise RuntimeError(f"refused with api-key={AZURE_KEY}")
    except RuntimeError:
        record.exc_info = sys.exc_info()
    assert RedactSecretsFilter().filter(record)
    assert AZURE_KEY not in record.getMessage()
    assert record.exc_text is not None
    assert AZURE_KEY not in record.exc_text
    assert "RuntimeError" in record.exc_text
