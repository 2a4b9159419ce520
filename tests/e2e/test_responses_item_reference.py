"""``item_reference`` with the real openai SDK through a running gateway, as the Vercel AI SDK sends it with its
default ``store: true``: earlier output items named by their ids instead of sent whole.

On an OpenAI-kind model (its own Responses API, the simulator's item ids passed on), an Anthropic-kind one
(translated, the gateway's item ids) and a Gemini-kind one (a message and a tool loop): turn 1 is stored, turn 2
sends a message, a function call (then its output) and Claude's signed reasoning by reference, JSON and streamed;
the simulator receives the items themselves. A ``store: false`` turn's items cannot be referenced, and neither
can another key's, across two worker processes.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml

from routing.simulator.server import SimulatorServer
from tests.e2e.conftest import SIM_KEY, fresh_database, gateway_config, manage
from tests.gateway_process import Gateway, run_gateway

pytestmark = pytest.mark.services

KINDS = [("oa/oa-model", "oa-model"), ("an/an-model", "an-model")]
EVERY_KIND = [*KINDS, ("ge/ge-model", "ge-model")]  # Gemini's calls carry its thought signatures in their ids
WEATHER: Any = {"type": "function", "name": "get_weather", "description": "The current weather of a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def ref(item: Any) -> dict[str, str]:
    return {"type": "item_reference", "id": item.id}


def of_type(response: Any, kind: str) -> list[Any]:
    return [item for item in response.output if item.type == kind]


def last_body(simulator: SimulatorServer, upstream: str) -> dict[str, Any]:
    body: dict[str, Any] = simulator.received(upstream)[-1]["body"]
    return body


@pytest.fixture(scope="module")
def open_gateway(simulator: SimulatorServer) -> Iterator[Gateway]:
    """One worker, open to loopback (one scope for every caller)."""
    with tempfile.TemporaryDirectory() as tmp, fresh_database("item_refs") as url:
        path = Path(tmp) / "config.yaml"
        path.write_text(yaml.safe_dump(gateway_config(simulator.base_url)))
        env = {"DATABASE_URL": url, "GOMODEL_CONFIG": str(path), "E2E_SIM_KEY": SIM_KEY, "GOMODEL_MASTER_KEY": "",
               "GOMODEL_AUTH": "open", "CELERY_BROKER_URL": ""}
        with run_gateway(Path(tmp), env) as gateway:
            yield gateway


@pytest.fixture
def oai(open_gateway: Gateway, simulator: SimulatorServer) -> Iterator[openai.OpenAI]:
    simulator.clear_faults()
    with openai.OpenAI(base_url=f"{open_gateway.base_url}/v1", api_key="unused-on-loopback",
                       max_retries=0) as client:
        yield client


@pytest.mark.parametrize(("model", "upstream"), EVERY_KIND)
def test_a_message_sent_back_by_reference_reaches_the_provider_whole(
        oai: openai.OpenAI, simulator: SimulatorServer, model: str, upstream: str) -> None:
    first = oai.responses.create(model=model, input="My name is Ada.")
    [message] = of_type(first, "message")
    follow = oai.responses.create(model=model, input=[
        {"role": "user", "content": "My name is Ada."}, ref(message),  # type: ignore[list-item]
        {"role": "user", "content": "What is my name?"}])
    assert follow.status == "completed"
    assert follow.output_text
    sent = json.dumps(last_body(simulator, upstream))
    assert "item_reference" not in sent
    assert message.id not in sent  # the item itself, not its id
    assert first.output_text in sent


@pytest.mark.parametrize(("model", "upstream"), EVERY_KIND)
@pytest.mark.parametrize("streamed", [False, True], ids=["json", "stream"])
def test_a_tool_loop_by_reference(oai: openai.OpenAI, simulator: SimulatorServer, model: str, upstream: str,
                                  streamed: bool) -> None:
    question = {"role": "user", "content": "What is the weather in Oslo?"}
    if streamed:
        with oai.responses.stream(model=model, input=[question], tools=[WEATHER], tool_choice="required") as stream:
            first = stream.get_final_response()
    else:
        first = oai.responses.create(model=model, input=[question], tools=[WEATHER],  # type: ignore[list-item]
                                     tool_choice="required")
    [call] = of_type(first, "function_call")
    follow = oai.responses.create(model=model, tools=[WEATHER], input=[  # type: ignore[list-item]
        question, ref(call), {"type": "function_call_output", "call_id": call.call_id, "output": "4 C and snow"}])
    assert follow.status == "completed"
    assert follow.output_text
    body = last_body(simulator, upstream)
    assert "item_reference" not in json.dumps(body)
    if upstream == "oa-model":
        assert body["input"][1] == {"type": "function_call", "call_id": call.call_id, "name": "get_weather",
                                    "arguments": call.arguments}
    elif upstream == "an-model":  # Anthropic's rules, enforced by the simulator: the tool_result answers its tool_use
        tool_use = body["messages"][1]["content"][-1]
        assert tool_use["type"] == "tool_use"
        assert body["messages"][2]["content"][0]["tool_use_id"] == tool_use["id"]
    else:  # Gemini: the call, with the thought signature it issued, then the function's response
        [part] = body["contents"][1]["parts"]
        assert part["functionCall"]["name"] == "get_weather"
        assert part.get("thoughtSignature")
        assert body["contents"][2]["parts"][0]["functionResponse"]["name"] == "get_weather"


def test_claudes_signed_reasoning_by_reference_keeps_thinking_on(oai: openai.OpenAI,
                                                                 simulator: SimulatorServer) -> None:
    thinking: Any = {"model": "an/an-model", "tools": [WEATHER], "reasoning": {"effort": "low"}}
    question = {"role": "user", "content": "Weather in Lima?"}
    first = oai.responses.create(**thinking, input=[question])
    [reasoning] = of_type(first, "reasoning")
    [call] = of_type(first, "function_call")
    assert reasoning.encrypted_content
    raw = oai.responses.with_raw_response.create(**thinking, input=[
        question, ref(reasoning), ref(call), {"type": "function_call_output", "call_id": call.call_id,
                                              "output": "21 C"}])
    assert "x-gomodel-thinking" not in raw.headers  # the signed block opened the tool turn again
    assert raw.parse().output_text
    assistant = last_body(simulator, "an-model")["messages"][1]["content"]
    assert [block["type"] for block in assistant] == ["thinking", "tool_use"]


@pytest.mark.parametrize(("model", "upstream"), KINDS)
def test_the_items_of_a_turn_not_stored_cannot_be_referenced(oai: openai.OpenAI, model: str,
                                                             upstream: str) -> None:
    private = oai.responses.create(model=model, input="A secret.", store=False)
    [message] = of_type(private, "message")
    with pytest.raises(openai.BadRequestError) as refused:
        oai.responses.create(model=model, input=[{"role": "user", "content": "A secret."}, ref(message)])  # type: ignore[list-item]
    assert refused.value.param == "input[1].id"  # type: ignore[attr-defined]
    assert refused.value.code == "item_not_found"
    assert message.id in str(refused.value)


@pytest.fixture(scope="module")
def keyed_workers(simulator: SimulatorServer) -> Iterator[tuple[Gateway, str, str]]:
    """Two worker processes (granian) and two keys: a follow-up may reach the other worker than its turn."""
    with tempfile.TemporaryDirectory() as tmp, fresh_database("item_refs_keys") as url:
        path = Path(tmp) / "config.yaml"
        path.write_text(yaml.safe_dump(gateway_config(simulator.base_url)))
        manage(url, "loadconfig", str(path), env={"E2E_SIM_KEY": SIM_KEY})
        alice = manage(url, "createkey", "alice").strip()
        bob = manage(url, "createkey", "bob").strip()
        env = {"DATABASE_URL": url, "E2E_SIM_KEY": SIM_KEY, "GOMODEL_MASTER_KEY": "", "CELERY_BROKER_URL": ""}
        with run_gateway(Path(tmp), env, server="granian") as gateway:
            yield gateway, alice, bob


def test_references_reach_any_worker_and_only_their_own_key(keyed_workers: tuple[Gateway, str, str]) -> None:
    gateway, alice, bob = keyed_workers
    url = f"{gateway.base_url}/v1"
    # Two clients of one key, so a turn and its follow-up travel on different connections (and often to
    # different workers); each follow-up is sent the moment its turn's answer arrived.
    with openai.OpenAI(base_url=url, api_key=alice, max_retries=0) as mine, \
            openai.OpenAI(base_url=url, api_key=alice, max_retries=0) as mine_again, \
            openai.OpenAI(base_url=url, api_key=bob, max_retries=0) as theirs:
        for turn in range(6):  # the gateway's own item ids: looked for again while their turn is on its way
            first = mine.responses.create(model="an/an-model", input=f"Remember the number {turn}.")
            follow = mine_again.responses.create(model="oa/oa-model", input=[
                ref(of_type(first, "message")[0]), {"role": "user", "content": "Which number?"}])  # type: ignore[list-item]
            assert follow.status == "completed"
        # The provider's own ids: their turn is certainly stored once a follow-up by id has found it.
        native = mine.responses.create(model="oa/oa-model", input="Remember the colour red.")
        mine_again.responses.create(model="an/an-model", input="Which colour?", previous_response_id=native.id)
        for stored in (first, native):
            [message] = of_type(stored, "message")
            again = mine_again.responses.create(model="an/an-model", input=[
                ref(message), {"role": "user", "content": "Again?"}])  # type: ignore[list-item]
            assert again.status == "completed"
            with pytest.raises(openai.BadRequestError) as refused:
                theirs.responses.create(model="an/an-model", input=[
                    ref(message), {"role": "user", "content": "Again?"}])  # type: ignore[list-item]
            assert refused.value.param == "input[0].id"  # type: ignore[attr-defined]
            assert refused.value.code == "item_not_found"
