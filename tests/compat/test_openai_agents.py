"""The OpenAI Agents SDK for Python, on its default Responses API and on chat completions: a multi-turn run (the
second given the first run's ``to_input_list()``) and an agent that calls a function tool.

Its default model provider reads a slash in a model name as a provider prefix of its own (``oa/oa-model`` is
``Unknown prefix: oa``), so the agent names the slash-free alias (``oa--oa-model``), or a provider built with
``unknown_prefix_mode="model_id"`` passes the public name through (docs/clients.md)."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from agents import Agent, RunConfig, Runner, function_tool
from agents.models.multi_provider import MultiProvider

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

APIS = {"responses": True, "chat": False}


def run_config(client: openai.AsyncOpenAI, api: str, **provider: Any) -> RunConfig:
    # Tracing off: the SDK would otherwise export every run's trace to OpenAI's own platform.
    return RunConfig(model_provider=MultiProvider(openai_client=client, openai_use_responses=APIS[api], **provider),
                     tracing_disabled=True)


async def multi_turn(compat: Compat, model: str, api: str) -> MultiTurn:
    async with openai.AsyncOpenAI(base_url=compat.openai_url, api_key=compat.key, max_retries=0) as client:
        agent = Agent(name="assistant", model=model)
        config = run_config(client, api)
        first = await Runner.run(agent, FIRST, run_config=config)
        second = await Runner.run(agent, [*first.to_input_list(), {"role": "user", "content": SECOND}],
                                  run_config=config)
    return MultiTurn(first.final_output, second.final_output)


async def tool_loop(compat: Compat, model: str, api: str, **provider: Any) -> ToolLoop:
    calls: list[dict[str, Any]] = []

    @function_tool
    def get_weather(city: str) -> str:
        """The current weather of a city."""
        calls.append({"city": city})
        return weather(city)

    async with openai.AsyncOpenAI(base_url=compat.openai_url, api_key=compat.key, max_retries=0) as client:
        agent = Agent(name="assistant", model=model, tools=[get_weather])
        result = await Runner.run(agent, QUESTION, run_config=run_config(client, api, **provider))
    return ToolLoop(calls, result.final_output)


@pytest.mark.parametrize("api", APIS)
def test_multi_turn(compat: Compat, kind: Kind, api: str) -> None:
    assert_multi_turn(asyncio.run(multi_turn(compat, kind.alias, api)), compat.simulator, kind)


@pytest.mark.parametrize("api", APIS)
def test_tool_loop(compat: Compat, kind: Kind, api: str) -> None:
    assert_tool_loop(asyncio.run(tool_loop(compat, kind.alias, api)), compat.simulator, kind)


def test_the_public_name_passes_through_a_provider_that_keeps_unknown_prefixes(compat: Compat, kind: Kind) -> None:
    outcome = asyncio.run(tool_loop(compat, kind.model, "responses", unknown_prefix_mode="model_id"))
    assert_tool_loop(outcome, compat.simulator, kind)
