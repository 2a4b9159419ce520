"""Tool call ids in the inbound protocol's shape: an Anthropic client served by an OpenAI-format upstream gets
``toolu_`` ids, and the ids it sends back reach the upstream exactly as the upstream issued them; stateless."""

from __future__ import annotations

import json
from typing import Any

import pytest

from routing.core.table import ModelSpec
from routing.providers import get_adapter
from routing.providers.common.ids import anthropic_tool_id, openai_upstream_tool_id
from routing.providers.common.tool_call_ids import new_tool_call_id

MODEL = ModelSpec(name="p/m", provider="p", upstream="m")
UPSTREAM_IDS = [
    "call_abc123", "call_Xy-9_z", "chatcmpl-tool-5f2c", "D681PevKs", "call_gm-trick", "call_", "id with spaces",
    "tooluse_bedrock_1", "toolu_01Already", "呼叫-1", new_tool_call_id("c2lnbmF0dXJlKy8/AB+="),
]


@pytest.mark.parametrize("upstream_id", UPSTREAM_IDS)
def test_an_anthropic_clients_id_maps_back_to_exactly_the_upstreams(upstream_id: str) -> None:
    client_id = anthropic_tool_id(upstream_id)
    assert client_id.startswith("toolu_")
    assert client_id[len("toolu_"):].replace("-", "").replace("_", "").isalnum()  # Anthropic's id alphabet
    assert openai_upstream_tool_id(client_id) == upstream_id


def test_the_plain_form_keeps_the_upstreams_own_letters() -> None:
    assert anthropic_tool_id("call_abc123") == "toolu_abc123"


def test_an_id_the_gateway_did_not_shape_is_renamed_the_same_way_everywhere() -> None:
    # A toolu_ id from a turn Anthropic served, now sent to an OpenAI-format upstream: call and result agree.
    assert openai_upstream_tool_id("toolu_01Native") == "call_01Native"
    assert openai_upstream_tool_id("my-own-id") == "my-own-id"
    assert openai_upstream_tool_id("toolu_gm-%%%") == "call_gm-%%%"  # not an encoding the gateway wrote


def openai_answer(call_id: str) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None,
                "tool_calls": [{"id": call_id, "type": "function",
                                "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}


@pytest.mark.parametrize("upstream_id", ["call_abc123", "chatcmpl-tool-5f2c"])
def test_a_tool_loop_of_an_anthropic_client_on_an_openai_upstream_sends_back_the_upstreams_id(
        upstream_id: str) -> None:
    adapter = get_adapter("openai")
    parsed = adapter.parse_response(status=200, data=json.dumps(openai_answer(upstream_id)).encode(),
                                    inbound="anthropic", public_model="pub")
    [block] = [b for b in parsed.client_body["content"] if b["type"] == "tool_use"]
    assert block["id"].startswith("toolu_")
    second_turn = {"model": "pub", "max_tokens": 50, "messages": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": [block]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block["id"], "content": "rain"}]}]}
    payload = adapter.payload(model=MODEL, body=second_turn, inbound="anthropic", stream=False)
    assert payload["messages"][1]["tool_calls"][0]["id"] == upstream_id
    assert payload["messages"][2] == {"role": "tool", "tool_call_id": upstream_id, "content": "rain"}


def test_a_streamed_tool_call_reaches_an_anthropic_client_with_a_toolu_id() -> None:
    chunks = [
        {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [
            {"index": 0, "delta": {"role": "assistant", "tool_calls": [
                {"index": 0, "id": "call_s1", "type": "function", "function": {"name": "w", "arguments": ""}}]}}]},
        {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [
            {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]},
             "finish_reason": "tool_calls"}]},
    ]
    data = b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks) + b"data: [DONE]\n\n"
    translator = get_adapter("openai").stream_translator(inbound="anthropic", public_model="pub",
                                                         client_wants_usage=True)
    text = b"".join(translator.feed(data) + translator.finish()).decode()
    starts = [json.loads(line[len("data: "):]) for line in text.splitlines()
              if line.startswith("data: ") and '"content_block_start"' in line]
    assert [s["content_block"]["id"] for s in starts] == ["toolu_s1"]
