"""The Node client libraries, each script a process of the pinned Node: Vercel's AI SDK with @ai-sdk/openai
(Responses and chat), the OpenAI Agents SDK for JavaScript (Responses and chat), the openai SDK (chat and
Responses) and the anthropic SDK, each holding the multi-turn chat and running the tool loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.compat import scenario
from tests.compat.conftest import Compat
from tests.compat.node_clients import ensure_installed, run_script
from tests.compat.scenario import Kind, MultiTurn, ToolLoop, assert_multi_turn, assert_tool_loop

pytestmark = pytest.mark.services

# (script, mode); the Agents SDK is given the slash-free alias, as docs/clients.md advises for it.
CLIENTS = [("ai_sdk.mjs", "responses"), ("ai_sdk.mjs", "chat"), ("openai_agents.mjs", "responses"),
           ("openai_agents.mjs", "chat"), ("openai.mjs", "chat"), ("openai.mjs", "responses"),
           ("anthropic.mjs", "messages")]
IDS = [f"{script.removesuffix('.mjs')}-{mode}" for script, mode in CLIENTS]


@pytest.fixture(scope="session")
def node() -> Path:
    return ensure_installed()


def settings(compat: Compat, kind: Kind, script: str, mode: str, name: str) -> dict[str, Any]:
    return {"baseUrl": compat.base_url, "openaiUrl": compat.openai_url, "key": compat.key, "mode": mode,
            "model": kind.alias if script == "openai_agents.mjs" else kind.model, "scenario": name,
            "first": scenario.FIRST, "second": scenario.SECOND, "question": scenario.QUESTION,
            "toolName": scenario.TOOL_NAME, "toolDescription": scenario.TOOL_DESCRIPTION,
            "toolParameters": scenario.TOOL_PARAMETERS, "toolResult": scenario.TOOL_RESULT}


@pytest.mark.parametrize(("script", "mode"), CLIENTS, ids=IDS)
def test_multi_turn(node: Path, compat: Compat, kind: Kind, script: str, mode: str) -> None:
    outcome = run_script(node, script, settings(compat, kind, script, mode, "multi_turn"))
    assert_multi_turn(MultiTurn(outcome["first"], outcome["second"]), compat.simulator, kind)


@pytest.mark.parametrize(("script", "mode"), CLIENTS, ids=IDS)
def test_tool_loop(node: Path, compat: Compat, kind: Kind, script: str, mode: str) -> None:
    outcome = run_script(node, script, settings(compat, kind, script, mode, "tool_loop"))
    assert_tool_loop(ToolLoop(outcome["calls"], outcome["answer"]), compat.simulator, kind)
