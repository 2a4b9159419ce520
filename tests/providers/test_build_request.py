"""Upstream URL, headers and body per provider kind; the pass-through path; keys never shown."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from routing.core.table import ProviderSpec
from routing.providers import get_adapter
from tests.providers.support import PROVIDERS, model

OPENAI_BODY = {"model": "pub", "messages": [{"role": "user", "content": "hi"}]}
ANTHROPIC_BODY = {"model": "pub", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}

ENDPOINTS = [
    ("openai", False, "http://127.0.0.1:18001/v1/chat/completions", {"Authorization": "Bearer sk-1"}),
    ("openai", True, "http://127.0.0.1:18001/v1/chat/completions", {"Authorization": "Bearer sk-1"}),
    ("azure_openai", False,
     "https://res.openai.azure.com/openai/deployments/my-deployment/chat/completions?api-version=2025-01-01-preview",
     {"api-key": "sk-1"}),
    ("anthropic", True, "http://127.0.0.1:18002/v1/messages",
     {"x-api-key": "sk-1", "anthropic-version": "2023-06-01"}),
    ("gemini", False,
     "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent",
     {"x-goog-api-key": "sk-1"}),
    ("gemini", True,
     "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
     {"x-goog-api-key": "sk-1"}),
]


@pytest.mark.parametrize(("kind", "stream", "url", "auth"), ENDPOINTS)
@pytest.mark.parametrize("inbound", ["openai", "anthropic"])
def test_it_addresses_each_provider_kind(kind: str, stream: bool, url: str, auth: dict[str, str],
                                         inbound: str) -> None:
    body = OPENAI_BODY if inbound == "openai" else ANTHROPIC_BODY
    request = get_adapter(kind).build_request(
        provider=PROVIDERS[kind], model=model(kind), body=dict(body), inbound=inbound,  # type: ignore[arg-type]
        stream=stream, api_key="sk-1",
    )
    assert (request.method, request.url) == ("POST", url)
    assert request.headers == {**auth, "Content-Type": "application/json"}
    assert "sk-1" not in repr(request)
    assert "sk-1" not in str(request.json)


@pytest.mark.parametrize(
    ("kind", "base_url", "upstream", "url"),
    [
        ("anthropic", "https://api.anthropic.com/v1/", "claude", "https://api.anthropic.com/v1/messages"),
        ("gemini", "https://g.test/v1beta", "models/gemini-pro", "https://g.test/v1beta/models/gemini-pro:generateContent"),
        ("azure_openai", "https://r.test/openai/", "dep 1",
         "https://r.test/openai/deployments/dep%201/chat/completions?api-version=2024-10-21"),
    ],
)
def test_it_tolerates_how_operators_write_base_urls(kind: str, base_url: str, upstream: str, url: str) -> None:
    provider = ProviderSpec(name="p", kind=kind, base_url=base_url)
    request = get_adapter(kind).build_request(
        provider=provider, model=model(kind, upstream=upstream), body=dict(OPENAI_BODY), inbound="openai",
        stream=False, api_key="k",
    )
    assert request.url == url


@pytest.mark.parametrize("kind", ["openai", "azure_openai"])
def test_openai_pass_through_rewrites_only_the_model_and_copies_shallowly(kind: str) -> None:
    messages = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,"
                                                                                        + "A" * 1000}}]}]
    body: dict[str, Any] = {"model": "pub", "messages": messages, "temperature": 0.1, "seed": 1,
                            "logit_bias": {"5": 1}, "vendor_extension": {"x": 1}}
    request = get_adapter(kind).build_request(
        provider=PROVIDERS[kind], model=model(kind), body=body, inbound="openai", stream=False, api_key="k")
    expected = {**body, "model": "gpt-4o-mini"} if kind == "openai" else {k: v for k, v in body.items() if k != "model"}
    assert request.json == expected
    assert request.json["messages"] is messages  # not copied
    assert body["model"] == "pub"  # the client's body is left alone


def test_openai_streams_always_ask_for_usage_and_keep_other_stream_options() -> None:
    body = {**OPENAI_BODY, "stream": True, "stream_options": {"include_obfuscation": False}}
    request = get_adapter("openai").build_request(
        provider=PROVIDERS["openai"], model=model(), body=body, inbound="openai", stream=True, api_key="k")
    assert request.json["stream_options"] == {"include_obfuscation": False, "include_usage": True}
    assert body["stream_options"] == {"include_obfuscation": False}


def test_non_streaming_requests_carry_no_stream_options() -> None:
    body = {**OPENAI_BODY, "stream": False, "stream_options": {"include_usage": True}}
    request = get_adapter("openai").build_request(
        provider=PROVIDERS["openai"], model=model(), body=body, inbound="openai", stream=False, api_key="k")
    assert "stream" not in request.json
    assert "stream_options" not in request.json


def test_anthropic_pass_through_rewrites_the_model_and_fills_a_missing_max_tokens() -> None:
    body: dict[str, Any] = {"model": "pub", "messages": [{"role": "user", "content": "hi"}],
                            "thinking": {"type": "adaptive"}, "context_management": {"edits": []}}
    request = get_adapter("anthropic").build_request(
        provider=PROVIDERS["anthropic"], model=model("anthropic", max_output_tokens=32000), body=body,
        inbound="anthropic", stream=True, api_key="k")
    assert request.json == {**body, "model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": True}
    assert request.json["messages"] is body["messages"]


def test_anthropic_clients_beta_header_reaches_anthropic_and_nothing_else_does() -> None:
    headers = {"Anthropic-Beta": "context-1m-2025-08-07", "Authorization": "Bearer gateway-key", "x-api-key": "gw"}
    allowing = dataclasses.replace(PROVIDERS["anthropic"], allowed_betas=frozenset({"context-1m-2025-08-07"}))
    request = get_adapter("anthropic").build_request(
        provider=allowing, model=model("anthropic"), body=dict(ANTHROPIC_BODY), inbound="anthropic",
        stream=False, api_key="sk-1", client_headers=headers)
    assert request.headers == {"x-api-key": "sk-1", "anthropic-version": "2023-06-01",
                               "Content-Type": "application/json", "anthropic-beta": "context-1m-2025-08-07"}
    for kind in ("openai", "gemini"):
        other = get_adapter(kind).build_request(
            provider=PROVIDERS[kind], model=model(kind), body=dict(ANTHROPIC_BODY), inbound="anthropic",
            stream=False, api_key="sk-1", client_headers=headers)
        assert "anthropic-beta" not in other.headers
        assert "gateway-key" not in str(other.headers)
