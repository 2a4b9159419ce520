"""Redaction and validation of audit events before they leave the gateway's memory."""

from __future__ import annotations

import json

import pytest

from audit.delivery.event import prepare_event
from audit.delivery.redact import cap_bytes, mask_secrets, preview, sha256_hex
from tests.audit.events import make_event

PROMPT = "Contact alice@example.com or call 0049 170 1234567; key sk-proj-abcdefghijklmnop1234 please"


def test_it_replaces_bodies_by_hash_and_redacted_preview_by_default() -> None:
    event = prepare_event(make_event(prompt_text=PROMPT, output_text="ok"), store_bodies=False, max_bytes=100)
    assert "prompt_text" not in event
    assert "output_text" not in event
    assert event["prompt_hash"] == sha256_hex(PROMPT)
    assert event["output_hash"] == sha256_hex("ok")
    assert "alice@example.com" not in event["prompt_preview"]
    assert "1234567" not in event["prompt_preview"]
    assert "sk-proj" not in event["prompt_preview"]
    assert event["prompt_preview"].startswith("Contact [email] or call [digits]")
    assert PROMPT not in json.dumps(event)


@pytest.mark.parametrize(
    ("text", "leaked"),
    [
        ("Authorization: Bearer abcdefghijklmnopqrstuvwx", "abcdefghijklmnopqrstuvwx"),
        ("the key is sk-ant-api03-AbCdEfGhIjKlMnOp", "AbCdEfGhIjKlMnOp"),
        ('{"api_key": "hunter2hunter2"}', "hunter2hunter2"),
        ("aws AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
        ("token=Zx9Q8w7E6r5T4y3U2i1O0pAsDfGhJkLl", "Zx9Q8w7E6r5T4y3U2i1O0pAsDfGhJkLl"),
        ("raw 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "9f86d081884c7d659a2feaa0c55ad015"),
    ],
)
def test_it_masks_anything_that_looks_like_a_credential(text: str, leaked: str) -> None:
    masked = mask_secrets(text)
    assert leaked not in masked
    assert "[secret]" in masked


# Shaped like real credentials, assembled so the source itself holds nothing key-shaped. Each is caught by one
# pattern only (no digits: the long-token rule leaves it alone), so each pattern's cheap gate is exercised.
LETTERS = "abcdefghij" * 3


@pytest.mark.parametrize(
    "credential",
    ["sk" + "-" + LETTERS[:16], "AK" + "IA" + "ABCDEFGHIJKLMNOP", "AI" + "za" + LETTERS, "gh" + "p_" + LETTERS,
     "gh" + "s_" + LETTERS, "xo" + "xb-" + LETTERS[:12], "ey" + "J" + LETTERS[:12] + "." + LETTERS[:10] + "." + LETTERS,
     "BeArEr " + LETTERS[:8]],
)
def test_each_credential_pattern_masks_its_credential_anywhere_in_the_text(credential: str) -> None:
    assert mask_secrets(f"sent {credential} upstream") == "sent [secret] upstream"
    long_text = "a perfectly ordinary sentence, " * 20
    assert mask_secrets(f"{long_text}{credential}") == f"{long_text}[secret]"


@pytest.mark.parametrize(
    ("text", "masked"),
    [("password: " + LETTERS, "password: [secret]"), ("the token = " + LETTERS, "the token = [secret]"),
     ("password " + LETTERS, "password " + LETTERS), ("ghp " + LETTERS, "ghp " + LETTERS)],
)
def test_named_credentials_need_a_separator(text: str, masked: str) -> None:
    assert mask_secrets(text) == masked


@pytest.mark.parametrize(
    "text",
    ["model anthropic/claude-3-5-sonnet-20241022 not found", "meta-llama-3-1-405b-instruct-turbo-v2 overloaded",
     "api_key: ${OPENAI_API_KEY}"],
)
def test_it_leaves_model_names_and_env_references_readable(text: str) -> None:
    assert mask_secrets(text) == text


def test_it_keeps_capped_bodies_with_credentials_masked_when_allowed() -> None:
    body = "é" * 100 + " sk-abcdefghijklmnopqrstuvwxyz"
    event = prepare_event(make_event(prompt_text=body, output_text="x" * 500), store_bodies=True, max_bytes=64)
    assert len(event["prompt_text"].encode()) <= 64
    assert event["prompt_text"] == "é" * 32
    assert len(event["output_text"]) == 64
    assert event["prompt_hash"] == sha256_hex(body)
    masked = prepare_event(make_event(prompt_text="use sk-abcdefghijklmnopqrstuvwxyz"), store_bodies=True,
                           max_bytes=1000)
    assert masked["prompt_text"] == "use [secret]"


def test_it_is_idempotent_so_the_worker_can_prepare_again() -> None:
    once = prepare_event(make_event(prompt_text=PROMPT), store_bodies=False, max_bytes=100)
    twice = prepare_event(json.loads(json.dumps(once)), store_bodies=False, max_bytes=100)
    assert twice == once


def test_it_masks_keys_echoed_in_error_messages_and_attempt_reasons() -> None:
    raw = make_event(error_message="Incorrect API key provided: sk-abcdefghijklmnopqrstu1234")
    raw["attempts"][0]["reason"] = "401 from upstream with Bearer abcdefghijklmnopqrs"
    event = prepare_event(raw, store_bodies=False, max_bytes=10)
    assert "sk-abc" not in event["error_message"]
    assert "abcdefghijklmnopqrs" not in event["attempts"][0]["reason"]


def test_it_coerces_malformed_fields_instead_of_failing() -> None:
    raw = make_event(
        status="500", latency_ms="fast", usage=None, tier="hard", key_id=True, stream="true",
        attempts=[{"seq": 1}, {"seq": 1}, "junk"], selection={"candidates": "none"}, requested_model="m\x00odel",
    )
    event = prepare_event(raw, store_bodies=False, max_bytes=10)
    assert event["status"] == 500
    assert event["latency_ms"] == 0.0
    assert event["usage"] == {"input_tokens": 0, "output_tokens": 0, "cached_input_tokens": 0, "reasoning_tokens": 0}
    assert event["tier"] is None
    assert event["key_id"] is None
    assert event["stream"] is True
    seqs = [a["seq"] for a in event["attempts"]]
    assert seqs[0] == 1
    assert len(set(seqs)) == 3
    assert event["selection"]["candidates"] == []
    assert event["requested_model"] == "model"


def test_it_derives_a_stable_request_id_when_the_event_has_none() -> None:
    raw = make_event()
    del raw["request_id"]
    first = prepare_event(raw, store_bodies=False, max_bytes=10)
    second = prepare_event(dict(raw), store_bodies=False, max_bytes=10)
    assert first["request_id"].startswith("derived-")
    assert first["request_id"] == second["request_id"]
    junk = prepare_event(["not", "an", "event"], store_bodies=False, max_bytes=10)
    assert junk["validation"] == "malformed_event"
    assert junk["request_id"].startswith("derived-")


def test_preview_is_short_and_single_line() -> None:
    text = "line one\n\n   line two " + "word " * 100
    shown = preview(text)
    assert "\n" not in shown
    assert len(shown) <= 80
    assert shown.endswith("…")
    assert cap_bytes("abc", 10) == "abc"


SECRETS = (
    "sk-proj" + "Q7x2Lm9Vb4Nc8Rt1Yw6Z" * 3,
    "AKIA" + "Q7X2LM9VB4NC8RT1",
    "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0" * 4 + ".c2lnbmF0dXJlX29mX3RoZV90b2tlbg",
    "Q7x2Lm9Vb4Nc8Rt1Yw6ZQ7x2Lm9Vb4Nc8Rt1Yw6Z",  # a random-looking run
    "alice.example.person@example-mail.com",
    "4155551234567",
)


def _fragments(secret: str, size: int = 5) -> set[str]:
    return {secret[i:i + size] for i in range(len(secret) - size + 1)}


@pytest.mark.parametrize("secret", SECRETS)
def test_a_secret_cut_by_a_window_shows_no_part_of_itself_wherever_it_falls(secret: str) -> None:
    # Whitespace pads the secret to every position around the raw window's end and, after whitespace collapses,
    # around the masked window's end; a masked token before it pulls the text after it forward into the preview.
    long_token = "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0" * 8 + ".c2lnbmF0dXJlX29mX3RoZV90b2tlbg"
    for lead in ("Note ", f"Token {long_token} then "):
        for filler in (" ", "word "):
            for count in range(0, 900, 3):
                if filler == "word " and count > 200:
                    break
                shown = preview(lead + filler * count + secret + " and more words after it")
                leaked = {part for part in _fragments(secret) if part in shown} - _fragments(long_token)
                assert not leaked, (lead, filler, count, shown)


def test_a_long_prompt_previews_its_start_masked_and_marked_as_cut() -> None:
    text = "Please mail alice@example.com about order 12345678. " + "More context here. " * 200
    shown = preview(text)
    assert shown.startswith("Please mail [email] about order [digits]. More context here.")
    assert shown.endswith("…")
    assert len(shown) <= 80


def test_text_without_spaces_keeps_its_preview() -> None:
    text = "请帮我检查这段代码是否有错误" * 40  # no whitespace anywhere, as in much CJK text
    shown = preview(text)
    assert shown == text[:79] + "…"
