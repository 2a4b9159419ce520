"""LiteLLM's SDK as a client of the gateway (its ``openai/`` provider with the gateway's URL and key): a
multi-turn chat (the second turn streamed) and a tool loop."""

from __future__ import annotations

import asyncio
import gc
import json
import warnings
from collections.abc import Iterator
from typing import Any

import litellm
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

pytestmark = [
    pytest.mark.services,
    # Pydantic on LiteLLM's own typed dicts (its message blocks', its logins'), built when a completion first runs.
    pytest.mark.filterwarnings("ignore:Items? .* on TypedDict class .* using the `ReadOnly` qualifier:UserWarning"),
]

TOOL: Any = {"type": "function", "function": {"name": TOOL_NAME, "description": TOOL_DESCRIPTION,
                                              "parameters": TOOL_PARAMETERS}}


@pytest.fixture(scope="module", autouse=True)
def litellm_leftovers() -> Iterator[None]:
    """LiteLLM takes the thread's event loop (making one when the thread has none) and caches HTTP clients for the
    process's life, closing neither. The thread gets a loop of this module's own for LiteLLM to take, closed here
    with the cached clients at the end of its tests, rather than see them reported against whichever test runs
    when they are collected (an earlier ``asyncio.run`` leaves the thread without a loop)."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield
    litellm.in_memory_llm_clients_cache.flush_cache()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        warnings.simplefilter("ignore", DeprecationWarning)  # asking for the thread's loop outside of one
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:  # the thread has no loop any more: only ours is left to close
            current = None
        for each in {loop, current} - {None}:
            if each is not None and not each.is_running():
                each.close()
        asyncio.set_event_loop(None)
        gc.collect()


def complete(compat: Compat, kind: Kind, messages: list[Any], **options: Any) -> Any:
    # "openai/" is LiteLLM's provider prefix; the rest is the gateway's public name, slash and all.
    return litellm.completion(model=f"openai/{kind.model}", api_base=compat.openai_url, api_key=compat.key,
                              messages=messages, num_retries=0, **options)


def test_multi_turn(compat: Compat, kind: Kind) -> None:
    messages: list[Any] = [{"role": "user", "content": FIRST}]
    first = complete(compat, kind, messages).choices[0].message.content
    messages += [{"role": "assistant", "content": first}, {"role": "user", "content": SECOND}]
    stream = complete(compat, kind, messages, stream=True)
    second = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert_multi_turn(MultiTurn(first, second), compat.simulator, kind)


def test_tool_loop(compat: Compat, kind: Kind) -> None:
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    calls = []
    while True:
        message = complete(compat, kind, messages, tools=[TOOL]).choices[0].message
        if not message.tool_calls:
            break
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            arguments = json.loads(call.function.arguments)
            calls.append(arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": weather(**arguments)})
    assert_tool_loop(ToolLoop(calls, message.content or ""), compat.simulator, kind)
