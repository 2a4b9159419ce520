"""Claude's thinking through a tool loop, turn after turn, with the real openai SDK through the gateway.

The simulator refuses what Anthropic refuses: with thinking on, a final tool turn that does not open with the
signed thinking block it issued. Each loop below passes only if the signed block survives the client's round trip.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

pytestmark = pytest.mark.services

TARGET = "an/an-model"
TOOLS: list[Any] = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
RESPONSES_TOOLS: list[Any] = [{"type": "function", "name": "get_weather", "description": "Weather for a city",
                               "parameters": TOOLS[0]["function"]["parameters"]}]


def _run_tool(arguments: str) -> str:
    return json.dumps({"city": json.loads(arguments).get("city"), "celsius": 18})


def test_it_keeps_thinking_on_through_a_chat_tool_loop_of_several_turns(oai: openai.OpenAI) -> None:
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    for turn in range(3):
        raw = oai.chat.completions.with_raw_response.create(model=TARGET, messages=messages, tools=TOOLS,
                                                            reasoning_effort="low")
        completion = raw.parse()
        message = completion.choices[0].message
        assert raw.headers["x-gomodel-target"] == TARGET
        assert "x-gomodel-thinking" not in raw.headers
        assert completion.choices[0].finish_reason == "tool_calls", turn
        assert (message.model_extra or {}).get("reasoning_content")
        # What an agent loop does: the SDK's own message back, then each tool's answer to its call id.
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls or []:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": _run_tool(call.function.arguments)})
        answer = oai.chat.completions.create(model=TARGET, messages=messages, tools=TOOLS, reasoning_effort="low")
        assert answer.choices[0].finish_reason == "stop"
        assert answer.choices[0].message.content
        messages.append({"role": "assistant", "content": answer.choices[0].message.content})
        messages.append({"role": "user", "content": f"And in city number {turn + 2}?"})


def test_it_keeps_thinking_on_through_a_streamed_chat_tool_loop(oai: openai.OpenAI) -> None:
    messages: list[Any] = [{"role": "user", "content": "Weather in Oslo?"}]
    stream = oai.chat.completions.create(model=TARGET, messages=messages, tools=TOOLS, reasoning_effort="low",
                                         stream=True)
    calls: dict[int, dict[str, str]] = {}
    for chunk in stream:
        for delta_call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            entry = calls.setdefault(delta_call.index, {"id": "", "name": "", "arguments": ""})
            entry["id"] += delta_call.id or ""
            entry["name"] += (delta_call.function.name or "") if delta_call.function else ""
            entry["arguments"] += (delta_call.function.arguments or "") if delta_call.function else ""
    assert len(calls) == 1
    call = calls[0]
    messages.append({"role": "assistant", "content": None, "tool_calls": [
        {"id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}]})
    messages.append({"role": "tool", "tool_call_id": call["id"], "content": _run_tool(call["arguments"])})
    raw = oai.chat.completions.with_raw_response.create(model=TARGET, messages=messages, tools=TOOLS,
                                                        reasoning_effort="low")
    assert raw.parse().choices[0].finish_reason == "stop"
    assert "x-gomodel-thinking" not in raw.headers


def test_it_turns_thinking_off_when_the_tool_turn_comes_back_without_it(oai: openai.OpenAI) -> None:
    first = oai.chat.completions.create(model=TARGET, messages=[{"role": "user", "content": "Weather in Rome?"}],
                                        tools=TOOLS, reasoning_effort="low")
    call = (first.choices[0].message.tool_calls or [])[0]
    # A client that keeps its own ids (or a turn another provider answered): the signed thinking is gone.
    messages: list[Any] = [
        {"role": "user", "content": "Weather in Rome?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_own1", "type": "function",
             "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": "call_own1", "content": _run_tool(call.function.arguments)},
    ]
    raw = oai.chat.completions.with_raw_response.create(model=TARGET, messages=messages, tools=TOOLS,
                                                        reasoning_effort="low")
    completion = raw.parse()
    assert completion.choices[0].finish_reason == "stop"
    assert raw.headers["x-gomodel-thinking"] == "off"
    assert not (completion.choices[0].message.model_extra or {}).get("reasoning_content")


def test_it_keeps_thinking_on_through_a_responses_tool_loop_with_encrypted_content(oai: openai.OpenAI) -> None:
    items: list[Any] = [{"role": "user", "content": "Weather in Lima?"}]
    for turn in range(2):
        response = oai.responses.create(model=TARGET, input=items, tools=RESPONSES_TOOLS,
                                        reasoning={"effort": "low"}, store=False)
        kinds = [item.type for item in response.output]
        assert "reasoning" in kinds, (turn, kinds)
        assert "function_call" in kinds, (turn, kinds)
        reasoning = next(item for item in response.output if item.type == "reasoning")
        assert reasoning.encrypted_content
        calls = [item for item in response.output if item.type == "function_call"]
        assert all("_th_" not in item.call_id for item in calls)
        # What the SDK's users do with store false: every output item back, then the outputs of the calls.
        items += [item.model_dump(exclude_none=True) for item in response.output]
        items += [{"type": "function_call_output", "call_id": item.call_id, "output": _run_tool(item.arguments)}
                  for item in calls]
        raw = oai.responses.with_raw_response.create(model=TARGET, input=items, tools=RESPONSES_TOOLS,
                                                     reasoning={"effort": "low"}, store=False)
        answer = raw.parse()
        assert "x-gomodel-thinking" not in raw.headers
        assert answer.status == "completed"
        assert answer.output_text
        items += [item.model_dump(exclude_none=True) for item in answer.output]
        items.append({"role": "user", "content": f"And city number {turn + 2}?"})
