"""A request needing something the model lacks is refused before sending, naming the capability."""

from __future__ import annotations

from typing import Any

import pytest

from routing.core.table import CAPABILITIES
from routing.providers import CapabilityError, get_adapter, required_capabilities, translation_error_body
from tests.providers.support import PROVIDERS, model

IMAGE_URL = {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}
IMAGE_BLOCK = {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}

OPENAI_NEEDS: list[tuple[dict[str, Any], str, str]] = [
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}, IMAGE_URL]}]}, "image",
     "messages[0].content[1]"),
    ({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {
        "data": "A", "format": "wav"}}]}]}, "audio", "messages[0].content[0]"),
    ({"messages": [{"role": "user", "content": [{"type": "file", "file": {
        "file_data": "data:application/pdf;base64,A"}}]}]}, "file", "messages[0].content[0]"),
    ({"messages": [{"role": "user", "content": "x"}], "tools": [TOOL]}, "tools", "tools"),
    ({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {
        "name": "r", "schema": {"type": "object"}}}}, "json_schema", "response_format"),
    ({"messages": [{"role": "user", "content": "x"}], "reasoning_effort": "high"}, "reasoning", "reasoning_effort"),
    ({"messages": [{"role": "user", "content": "x"}], "functions": [{"name": "f"}]}, "tools", "functions"),
    ({"messages": [{"role": "user", "content": "x"}], "modalities": ["text", "audio"]}, "audio", "modalities"),
    ({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": None, "audio": {"id": "a1"}}]},
     "audio", "messages[1].audio"),
]

ANTHROPIC_NEEDS: list[tuple[dict[str, Any], str, str]] = [
    ({"messages": [{"role": "user", "content": [IMAGE_BLOCK]}]}, "image", "messages[0].content[0]"),
    ({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [
        {"type": "text", "text": "x"}, IMAGE_BLOCK]}]}]}, "image", "messages[0].content[0].content[1]"),
    ({"messages": [{"role": "user", "content": [{"type": "document", "source": {
        "type": "base64", "media_type": "application/pdf", "data": "A"}}]}]}, "file", "messages[0].content[0]"),
    ({"messages": [{"role": "user", "content": "x"}], "tools": [{"name": "f", "input_schema": {}}]}, "tools",
     "tools"),
    ({"messages": [{"role": "user", "content": "x"}], "output_config": {"format": {
        "type": "json_schema", "schema": {"type": "object"}}}}, "json_schema", "output_config.format"),
    ({"messages": [{"role": "user", "content": "x"}], "thinking": {"type": "enabled", "budget_tokens": 2000}},
     "reasoning", "thinking"),
]

CASES = [("openai", *case) for case in OPENAI_NEEDS] + [("anthropic", *case) for case in ANTHROPIC_NEEDS]


@pytest.mark.parametrize(("inbound", "body", "capability", "path"), CASES)
@pytest.mark.parametrize("kind", ["openai", "azure_openai", "anthropic", "gemini"])
def test_it_refuses_a_model_without_the_capability(
    kind: str, inbound: str, body: dict[str, Any], capability: str, path: str
) -> None:
    lacking = model(kind, capabilities=frozenset(CAPABILITIES) - {capability})
    with pytest.raises(CapabilityError) as raised:
        get_adapter(kind).build_request(provider=PROVIDERS[kind], model=lacking, body={"model": "p", **body},
                                        inbound=inbound, stream=False, api_key="k")  # type: ignore[arg-type]
    error = raised.value
    assert (error.capability, error.param, error.status) == (capability, path, 400)
    assert f"capability '{capability}'" in error.message
    assert kind + "/public" in error.message


@pytest.mark.parametrize(("inbound", "body", "capability", "path"), CASES)
def test_it_lists_what_a_request_needs(inbound: str, body: dict[str, Any], capability: str, path: str) -> None:
    assert required_capabilities(inbound, body) == {capability: path}  # type: ignore[arg-type]


def test_a_plain_text_request_needs_nothing_and_the_scan_tolerates_odd_shapes() -> None:
    assert required_capabilities("openai", {"messages": [{"role": "user", "content": "x"}]}) == {}
    assert required_capabilities("openai", {"messages": "x", "reasoning_effort": "none", "tools": []}) == {}
    assert required_capabilities("anthropic", {"messages": [None, {"content": [1, {"type": None}]}],
                                               "thinking": {"type": "disabled"}}) == {}


@pytest.mark.parametrize("inbound", ["openai", "anthropic"])
def test_the_refusal_becomes_a_400_in_the_clients_envelope(inbound: str) -> None:
    body = OPENAI_NEEDS[0][0] if inbound == "openai" else ANTHROPIC_NEEDS[0][0]
    with pytest.raises(CapabilityError) as raised:
        get_adapter("openai").build_request(provider=PROVIDERS["openai"], model=model(capabilities=frozenset({"text"})),
                                            body={"model": "p", **body}, inbound=inbound,  # type: ignore[arg-type]
                                            stream=False, api_key="k")
    envelope = translation_error_body(inbound, raised.value)  # type: ignore[arg-type]
    if inbound == "openai":
        assert envelope["error"]["type"] == "invalid_request_error"
        assert envelope["error"]["code"] == "unsupported_capability"
        assert envelope["error"]["param"] == "messages[0].content[1]"
        assert "image" in envelope["error"]["message"]
    else:
        assert envelope["type"] == "error"
        assert envelope["error"]["type"] == "invalid_request_error"
        assert "messages[0].content[0]" in envelope["error"]["message"]
