"""Pydantic AI with its OpenAI chat, OpenAI Responses and Anthropic models: a multi-turn run (the second given the
first's ``all_messages()``) and an agent that calls a tool."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import anthropic
import openai
import pytest
from pydantic_ai import Agent
from pydantic_ai.models import Model
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

from tests.compat.conftest import Compat
from tests.compat.scenario import (
    FIRST,
    QUESTION,
    SECOND,
    Kind,
    MultiTurn,
    ToolLoop,
    assert_multi_turn,
    assert_tool_loop,
    weather,
)

pytestmark = pytest.mark.services

Maker = Callable[[Compat, Kind], contextlib.AbstractAsyncContextManager[Model]]


@contextlib.asynccontextmanager
async def openai_chat(compat: Compat, kind: Kind) -> AsyncIterator[Model]:
    async with openai.AsyncOpenAI(base_url=compat.openai_url, api_key=compat.key, max_retries=0) as client:
        yield OpenAIChatModel(kind.model, provider=OpenAIProvider(openai_client=client))


@contextlib.asynccontextmanager
async def openai_responses(compat: Compat, kind: Kind) -> AsyncIterator[Model]:
    async with openai.AsyncOpenAI(base_url=compat.openai_url, api_key=compat.key, max_retries=0) as client:
        yield OpenAIResponsesModel(kind.model, provider=OpenAIProvider(openai_client=client))


@contextlib.asynccontextmanager
async def anthropic_messages(compat: Compat, kind: Kind) -> AsyncIterator[Model]:
    async with anthropic.AsyncAnthropic(base_url=compat.base_url, api_key=compat.key, max_retries=0) as client:
        yield AnthropicModel(kind.model, provider=AnthropicProvider(anthropic_client=client))


MODELS: list[Maker] = [openai_chat, openai_responses, anthropic_messages]
IDS = ["openai-chat", "openai-responses", "anthropic"]


async def multi_turn(make: Maker, compat: Compat, kind: Kind) -> MultiTurn:
    async with make(compat, kind) as model:
        agent = Agent(model)
        first = await agent.run(FIRST)
        second = await agent.run(SECOND, message_history=first.all_messages())
    return MultiTurn(first.output, second.output)


async def tool_loop(make: Maker, compat: Compat, kind: Kind) -> ToolLoop:
    calls: list[dict[str, Any]] = []

    def get_weather(city: str) -> str:
        """The current weather of a city."""
        calls.append({"city": city})
        return weather(city)

    async with make(compat, kind) as model:
        result = await Agent(model, tools=[get_weather]).run(QUESTION)
    return ToolLoop(calls, result.output)


@pytest.mark.parametrize("make", MODELS, ids=IDS)
def test_multi_turn(make: Maker, compat: Compat, kind: Kind) -> None:
    assert_multi_turn(asyncio.run(multi_turn(make, compat, kind)), compat.simulator, kind)


@pytest.mark.parametrize("make", MODELS, ids=IDS)
def test_tool_loop(make: Maker, compat: Compat, kind: Kind) -> None:
    assert_tool_loop(asyncio.run(tool_loop(make, compat, kind)), compat.simulator, kind)
