"""Tool call ids in the inbound protocol's shape, and back on the next turn, with the real SDKs through a running
gateway: an Anthropic client served by an OpenAI-format or Gemini target gets ``toolu_`` ids (JSON and streamed),
and the provider gets back exactly the id it issued; an OpenAI client served by an Anthropic-kind target gets
Claude's own ``toolu_`` id (OpenAI's clients treat call ids as opaque), which reaches Claude unchanged.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from routing.simulator.server import SimulatorServer

pytestmark = pytest.mark.services

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
ANTHROPIC_TOOLS: Any = [{"name": "get_weather", "description": "Weather for a city", "input_schema": SCHEMA}]
OPENAI_TOOLS: Any = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                                       "parameters": SCHEMA}}]
# Each OpenAI-format target and the upstream model name the simulator records it under.
OPENAI_FORMAT = [("oa/oa-model", "oa-model"), ("az/az-model", "az-model"), ("ge/ge-model", "ge-model")]


@pytest.mark.parametrize(("target", "upstream"), OPENAI_FORMAT)
@pytest.mark.parametrize("streamed", [False, True], ids=["json", "stream"])
def test_an_anthropic_client_gets_toolu_ids_that_map_back_to_the_providers(
        claude: anthropic.Anthropic, sim: SimulatorServer, target: str, upstream: str, streamed: bool) -> None:
    question: Any = {"role": "user", "content": "Weather in Paris?"}
    if streamed:
        with claude.messages.stream(model=target, max_tokens=200, messages=[question], tools=ANTHROPIC_TOOLS,
                                    tool_choice={"type": "any"}) as stream:
            message = stream.get_final_message()
    else:
        message = claude.messages.create(model=target, max_tokens=200, messages=[question], tools=ANTHROPIC_TOOLS,
                                         tool_choice={"type": "any"})
    [use] = [block for block in message.content if block.type == "tool_use"]
    assert use.id.startswith("toolu_")
    assert use.id[len("toolu_"):].replace("-", "").replace("_", "").isalnum()  # Anthropic's id alphabet
    follow = claude.messages.create(model=target, max_tokens=200, tools=ANTHROPIC_TOOLS, messages=[
        question, {"role": "assistant", "content": [use.model_dump()]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "18 degrees"}]}])
    assert follow.content
    sent = json.dumps(sim.received(upstream)[-1]["body"])
    assert use.id not in sent  # the provider never sees the id in the client's shape
    if upstream != "ge-model":  # Gemini names calls by function: its ids are the gateway's own
        body = sim.received(upstream)[-1]["body"]
        issued = body["messages"][1]["tool_calls"][0]["id"]
        assert issued.startswith("call_")
        assert use.id == "toolu_" + issued[len("call_"):]
        assert body["messages"][2] == {"role": "tool", "tool_call_id": issued, "content": "18 degrees"}


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "stream"])
def test_an_openai_client_of_claude_gets_claudes_own_id_back_to_claude(
        oai: openai.OpenAI, sim: SimulatorServer, streamed: bool) -> None:
    question: Any = {"role": "user", "content": "Weather in Paris?"}
    if streamed:
        call_id, name, arguments = "", "", ""
        for chunk in oai.chat.completions.create(model="an/an-model", messages=[question], tools=OPENAI_TOOLS,
                                                 tool_choice="required", stream=True):
            for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                call_id += delta.id or ""
                name += (delta.function.name or "") if delta.function else ""
                arguments += (delta.function.arguments or "") if delta.function else ""
    else:
        completion = oai.chat.completions.create(model="an/an-model", messages=[question], tools=OPENAI_TOOLS,
                                                 tool_choice="required")
        [call] = completion.choices[0].message.tool_calls or []
        call_id, name, arguments = call.id, call.function.name, call.function.arguments
    assert call_id.startswith("toolu_")
    follow = oai.chat.completions.create(model="an/an-model", tools=OPENAI_TOOLS, messages=[
        question, {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": call_id, "content": "18 degrees"}])
    assert follow.choices[0].message.content
    messages = sim.received("an-model")[-1]["body"]["messages"]
    [tool_use] = [block for block in messages[1]["content"] if block["type"] == "tool_use"]
    assert tool_use["id"] == call_id
    assert messages[2]["content"][0] == {"type": "tool_result", "tool_use_id": call_id, "content": "18 degrees"}
