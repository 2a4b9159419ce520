"""The openai SDK for Python, on chat completions and on the Responses API (each turn stored, the history sent
back by reference as the SDK's users do with ``previous_response_id``, and sent whole)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.compat.conftest import Compat
from tests.compat.scenario import (
    FIRST,
    QUESTION,
    SECOND,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    TOOL_PARAMETERS,
    Kind,
    MultiTurn,
    ToolLoop,
    assert_multi_turn,
    assert_tool_loop,
    weather,
)

pytestmark = pytest.mark.services

CHAT_TOOL: Any = {"type": "function", "function": {"name": TOOL_NAME, "description": TOOL_DESCRIPTION,
                                                   "parameters": TOOL_PARAMETERS}}
RESPONSES_TOOL: Any = {"type": "function", "name": TOOL_NAME, "description": TOOL_DESCRIPTION,
                       "parameters": TOOL_PARAMETERS, "strict": True}


@pytest.fixture
def client(compat: Compat) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=compat.openai_url, api_key=compat.key, max_retries=0) as sdk:
        yield sdk


def test_chat_multi_turn(client: openai.OpenAI, compat: Compat, kind: Kind) -> None:
    messages: list[Any] = [{"role": "user", "content": FIRST}]
    first = client.chat.completions.create(model=kind.model, messages=messages).choices[0].message
    messages += [{"role": "assistant", "content": first.content}, {"role": "user", "content": SECOND}]
    stream = client.chat.completions.create(model=kind.model, messages=messages, stream=True)
    second = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert_multi_turn(MultiTurn(first.content or "", second), compat.simulator, kind)


def test_chat_tool_loop(client: openai.OpenAI, compat: Compat, kind: Kind) -> None:
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    calls = []
    while True:
        completion = client.chat.completions.create(model=kind.model, messages=messages, tools=[CHAT_TOOL])
        message = completion.choices[0].message
        if not message.tool_calls:
            break
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            arguments = json.loads(call.function.arguments)
            calls.append(arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": weather(**arguments)})
    assert_tool_loop(ToolLoop(calls, message.content or ""), compat.simulator, kind)


def test_responses_multi_turn(client: openai.OpenAI, compat: Compat, kind: Kind) -> None:
    first = client.responses.create(model=kind.model, input=FIRST)
    second = client.responses.create(model=kind.model, input=SECOND, previous_response_id=first.id)
    assert_multi_turn(MultiTurn(first.output_text, second.output_text), compat.simulator, kind)


def test_responses_tool_loop(client: openai.OpenAI, compat: Compat, kind: Kind) -> None:
    items: list[Any] = [{"role": "user", "content": QUESTION}]
    calls = []
    while True:
        with client.responses.stream(model=kind.model, input=items, tools=[RESPONSES_TOOL], store=False) as stream:
            response = stream.get_final_response()
        called = [item for item in response.output if item.type == "function_call"]
        if not called:
            break
        items += [item.model_dump(exclude_none=True) for item in response.output]
        for call in called:
            arguments = json.loads(call.arguments)
            calls.append(arguments)
            items.append({"type": "function_call_output", "call_id": call.call_id, "output": weather(**arguments)})
    assert_tool_loop(ToolLoop(calls, response.output_text), compat.simulator, kind)
