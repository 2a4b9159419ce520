"""LangChain: ``ChatOpenAI`` on chat completions and in its Responses mode (``use_responses_api=True``), and
``ChatAnthropic`` on Messages; each holds a multi-turn chat (the second turn streamed) and runs a tool loop with
``bind_tools``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from tests.compat.conftest import Compat
from tests.compat.scenario import (
    FIRST,
    QUESTION,
    SECOND,
    TOOL_RESULT,
    Kind,
    MultiTurn,
    ToolLoop,
    assert_multi_turn,
    assert_tool_loop,
)

pytestmark = pytest.mark.services


@tool
def get_weather(city: str) -> str:
    """The current weather of a city."""
    return TOOL_RESULT


def openai_chat(compat: Compat, kind: Kind) -> BaseChatModel:
    return ChatOpenAI(model=kind.model, base_url=compat.openai_url, api_key=SecretStr(compat.key), max_retries=0)


def openai_responses(compat: Compat, kind: Kind) -> BaseChatModel:
    return ChatOpenAI(model=kind.model, base_url=compat.openai_url, api_key=SecretStr(compat.key), max_retries=0,
                      use_responses_api=True)


def anthropic_messages(compat: Compat, kind: Kind) -> BaseChatModel:
    return ChatAnthropic(model_name=kind.model, base_url=compat.base_url, api_key=SecretStr(compat.key),
                         max_retries=0, timeout=30, stop=None, max_tokens=300)


MODES: list[Callable[[Compat, Kind], BaseChatModel]] = [openai_chat, openai_responses, anthropic_messages]
IDS = ["openai-chat", "openai-responses", "anthropic"]


@pytest.mark.parametrize("make", MODES, ids=IDS)
def test_multi_turn(make: Callable[[Compat, Kind], BaseChatModel], compat: Compat, kind: Kind) -> None:
    model = make(compat, kind)
    history: list[BaseMessage] = [HumanMessage(FIRST)]
    first = model.invoke(history)
    history += [first, HumanMessage(SECOND)]
    second = "".join(chunk.text for chunk in model.stream(history))
    assert_multi_turn(MultiTurn(first.text, second), compat.simulator, kind)


@pytest.mark.parametrize("make", MODES, ids=IDS)
def test_tool_loop(make: Callable[[Compat, Kind], BaseChatModel], compat: Compat, kind: Kind) -> None:
    model = make(compat, kind).bind_tools([get_weather])
    history: list[BaseMessage] = [HumanMessage(QUESTION)]
    calls: list[dict[str, Any]] = []
    while True:
        answer = model.invoke(history)
        assert isinstance(answer, AIMessage)
        history.append(answer)
        if not answer.tool_calls:
            break
        for call in answer.tool_calls:
            calls.append(call["args"])
            history.append(ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"]))
    assert_tool_loop(ToolLoop(calls, answer.text), compat.simulator, kind)
