"""The anthropic SDK for Python on the Messages API: a multi-turn chat (the second turn streamed) and a tool loop."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
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

TOOL: Any = {"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "input_schema": TOOL_PARAMETERS}


@pytest.fixture
def client(compat: Compat) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=compat.base_url, api_key=compat.key, max_retries=0) as sdk:
        yield sdk


def text_of(message: Any) -> str:
    return "".join(block.text for block in message.content if block.type == "text")


def test_multi_turn(client: anthropic.Anthropic, compat: Compat, kind: Kind) -> None:
    messages: list[Any] = [{"role": "user", "content": FIRST}]
    first = client.messages.create(model=kind.model, max_tokens=200, messages=messages)
    messages += [{"role": "assistant", "content": first.content}, {"role": "user", "content": SECOND}]
    with client.messages.stream(model=kind.model, max_tokens=200, messages=messages) as stream:
        second = "".join(stream.text_stream)
    assert_multi_turn(MultiTurn(text_of(first), second), compat.simulator, kind)


def test_tool_loop(client: anthropic.Anthropic, compat: Compat, kind: Kind) -> None:
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    calls = []
    while True:
        message = client.messages.create(model=kind.model, max_tokens=200, messages=messages, tools=[TOOL])
        uses = [block for block in message.content if block.type == "tool_use"]
        if message.stop_reason != "tool_use":
            break
        messages.append({"role": "assistant", "content": message.content})
        calls += [use.input for use in uses]
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": use.id, "content": weather(**use.input)} for use in uses]})
    assert_tool_loop(ToolLoop(calls, text_of(message)), compat.simulator, kind)
