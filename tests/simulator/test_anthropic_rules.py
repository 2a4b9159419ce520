"""The simulator refuses what Anthropic refuses in a conversation, with Anthropic's error shape and wording."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2 as httpx
import pytest

from routing.simulator import SimulatorServer
from routing.simulator.wire.anthropic_rules import REDACTED_TRIGGER
from tests.simulator.wire_helpers import ANTHROPIC_HEADERS, WEATHER_TOOL_SCHEMA

TOOL = {"name": "get_weather", "description": "Weather by city", "input_schema": WEATHER_TOOL_SCHEMA}
THINKING = {"type": "enabled", "budget_tokens": 1024}


def post(client: httpx.Client, messages: list[Any], **extra: Any) -> httpx.Response:
    body = {"model": "claude-test", "max_tokens": 4096, "tools": [TOOL], "messages": messages, **extra}
    return client.post("/v1/messages", json=body, headers=ANTHROPIC_HEADERS)


def first_turn(client: httpx.Client, text: str = "Weather in Oslo?") -> list[Any]:
    """A thinking turn that calls the tool: the assistant content exactly as answered."""
    answer = post(client, [{"role": "user", "content": text}], thinking=THINKING).json()
    assert answer["stop_reason"] == "tool_use"
    return list(answer["content"])


def loop(question: str, content: list[Any]) -> list[Any]:
    """The conversation that answers every tool call of ``content``."""
    results = [{"type": "tool_result", "tool_use_id": b["id"], "content": "18 C"}
               for b in content if b["type"] == "tool_use"]
    return [{"role": "user", "content": question}, {"role": "assistant", "content": content},
            {"role": "user", "content": results}]


def refusal(response: httpx.Response) -> str:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert body["request_id"].startswith("req_")
    message: str = body["error"]["message"]
    return message


def test_it_accepts_a_tool_loop_that_sends_back_the_signed_thinking(client: httpx.Client) -> None:
    content = first_turn(client)
    assert [b["type"] for b in content] == ["thinking", "tool_use"]
    answer = post(client, loop("Weather in Oslo?", content), thinking=THINKING)
    assert answer.status_code == 200, answer.text
    assert answer.json()["stop_reason"] == "end_turn"


def test_it_refuses_a_final_tool_turn_without_thinking_while_thinking_is_on(client: httpx.Client) -> None:
    content = [b for b in first_turn(client) if b["type"] != "thinking"]
    message = refusal(post(client, loop("Weather in Oslo?", content), thinking=THINKING))
    assert message.startswith("messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                              "`tool_use`. When `thinking` is enabled, a final `assistant` message must start with "
                              "a thinking block")
    # The same turn with thinking off is valid.
    assert post(client, loop("Weather in Oslo?", content)).status_code == 200


def test_it_refuses_thinking_whose_text_was_changed_or_whose_signature_it_did_not_issue(
        client: httpx.Client) -> None:
    content = first_turn(client)
    altered = [{**content[0], "thinking": content[0]["thinking"] + " (edited)"}, *content[1:]]
    assert refusal(post(client, loop("Weather in Oslo?", altered), thinking=THINKING)) == (
        "messages.1.content.0: Invalid `signature` in `thinking` block")
    forged = [{**content[0], "signature": "c2ln"}, *content[1:]]
    assert "Invalid `signature`" in refusal(post(client, loop("Weather in Oslo?", forged), thinking=THINKING))


def test_it_answers_the_magic_string_with_a_redacted_block_it_accepts_back(client: httpx.Client) -> None:
    question = f"Weather in Oslo? {REDACTED_TRIGGER}"
    content = first_turn(client, question)
    assert [b["type"] for b in content] == ["redacted_thinking", "thinking", "tool_use"]
    assert post(client, loop(question, content), thinking=THINKING).status_code == 200
    tampered = [{"type": "redacted_thinking", "data": "bm90IG1pbmU="}, *content[1:]]
    assert "Invalid `data` in `redacted_thinking` block" in refusal(
        post(client, loop(question, tampered), thinking=THINKING))


def test_it_signs_the_streamed_thinking_the_same_way(client: httpx.Client) -> None:
    body = {"model": "claude-test", "max_tokens": 4096, "tools": [TOOL], "thinking": THINKING,
            "messages": [{"role": "user", "content": "Weather in Oslo?"}]}
    with anthropic.Anthropic(base_url=str(client.base_url), api_key="sk-ant-test", max_retries=0) as sdk, \
            sdk.messages.stream(**body) as stream:  # type: ignore[arg-type]
        message = stream.get_final_message()
    content = [block.model_dump(exclude_none=True) for block in message.content]
    for block in content:
        block.pop("citations", None)
    assert [b["type"] for b in content] == ["thinking", "tool_use"]
    assert post(client, loop("Weather in Oslo?", content), thinking=THINKING).status_code == 200


def test_it_refuses_a_tool_use_not_answered_in_the_next_turn(client: httpx.Client) -> None:
    content = [{"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Oslo"}}]
    messages = [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": content},
                {"role": "user", "content": "never mind"}]
    assert refusal(post(client, messages)) == (
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01A. Each "
        "`tool_use` block must have a corresponding `tool_result` block in the next message.")


def test_it_refuses_a_tool_result_that_answers_no_call_of_the_turn_before(client: httpx.Client) -> None:
    messages = [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": "Let me see."},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_404", "content": "x"}]}]
    assert refusal(post(client, messages)) == (
        "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_404. Each "
        "`tool_result` block must have a corresponding `tool_use` block in the previous message.")


@pytest.mark.parametrize(("ids", "expected"), [
    (["call.1"], "messages.1.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"),
    (["toolu_1", "toolu_1"], "messages.1.content.1: `tool_use` ids must be unique"),
])
def test_it_refuses_tool_use_ids_anthropic_refuses(client: httpx.Client, ids: list[str], expected: str) -> None:
    content = [{"type": "tool_use", "id": i, "name": "get_weather", "input": {}} for i in ids]
    results = [{"type": "tool_result", "tool_use_id": i, "content": "x"} for i in ids]
    messages = [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": content},
                {"role": "user", "content": results}]
    assert refusal(post(client, messages)) == expected


def test_it_combines_consecutive_turns_of_one_role_as_anthropic_does(client: httpx.Client) -> None:
    content = [{"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Oslo"}}]
    messages = [{"role": "user", "content": "Weather?"}, {"role": "user", "content": "In Oslo."},
                {"role": "assistant", "content": "Checking."}, {"role": "assistant", "content": content},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01A", "content": "x"}]}]
    assert post(client, messages).status_code == 200


def test_it_words_the_rules_for_claude_on_bedrock_as_bedrock_relays_them(sim: SimulatorServer) -> None:
    body = {"messages": [
        {"role": "user", "content": [{"text": "Weather?"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "tu_1", "name": "get_weather", "input": {}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "tu_1", "content": [{"text": "x"}]}}]}],
        "toolConfig": {"tools": [{"toolSpec": {"name": "get_weather", "inputSchema": {"json": WEATHER_TOOL_SCHEMA}}}]},
        "inferenceConfig": {"maxTokens": 4096},
        "additionalModelRequestFields": {"thinking": THINKING}}
    with httpx.Client(base_url=sim.base_url) as client:
        response = client.post("/model/anthropic.claude-test-v1:0/converse", json=body,
                               headers={"Authorization": "Bearer sk-test"})
    assert response.status_code == 400, response.text
    assert response.json()["message"].startswith(
        "The model returned the following errors: messages.1.content.0.type: Expected `thinking` or "
        "`redacted_thinking`, but found `tool_use`.")
