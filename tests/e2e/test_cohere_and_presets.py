"""The real openai and anthropic SDKs against a running gateway routed to a simulated Cohere provider and to
an OpenAI-compatible preset (a keyless vLLM, and Mistral's rules), with faults injected at the simulator."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import jsonschema
import openai
import pytest
import yaml

from routing.simulator.server import SimulatorServer
from tests.e2e.conftest import SIM_KEY, fresh_database
from tests.gateway_process import Gateway, run_gateway

pytestmark = pytest.mark.services

CAPS = ["text", "tools", "json_schema"]
SIM_MODELS = {name: {"latency_ms": 2, "chunk_count": 4}
              for name in ("command-a", "rl-a", "rl-b", "se-a", "se-b", "mj-a", "mj-b", "sc-a", "sc-b", "er-a",
                           "local-llama", "mistral-small")}
# The mid-stream error must come after content the gateway has relayed: with the chunks 2 ms apart a busy machine
# reads the content and the error in one read, before the answer has begun, which is a 502 and not this test's case.
SIM_MODELS["er-a"]["chunk_interval_ms"] = 200
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
ANSWER = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def config(sim_url: str) -> dict[str, Any]:
    cohere = [{"provider": "co", "upstream": name, "name": f"co/{name}", "input_price": 1.0, "output_price": 2.0,
               "capabilities": CAPS} for name in SIM_MODELS if name not in ("local-llama", "mistral-small")]
    return {
        "providers": [
            {"name": "co", "kind": "cohere", "base_url": sim_url, "api_key": "${E2E_SIM_KEY}"},
            {"name": "local", "kind": "vllm", "base_url": f"{sim_url}/v1"},
            {"name": "mi", "kind": "mistral", "base_url": f"{sim_url}/v1", "api_key": "${E2E_SIM_KEY}"},
        ],
        "models": [
            *cohere,
            {"provider": "local", "upstream": "local-llama", "capabilities": CAPS},
            {"provider": "mi", "upstream": "mistral-small", "capabilities": CAPS},
        ],
        "virtual_models": [{"source": f"{pair}-pool", "strategy": "failover",
                            "targets": [f"co/{pair}-a", f"co/{pair}-b"]} for pair in ("rl", "se", "mj", "sc")],
    }


@pytest.fixture(scope="module")
def sim() -> Iterator[SimulatorServer]:
    with SimulatorServer(config={"models": SIM_MODELS}) as server:
        yield server


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, sim: SimulatorServer) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp("cohere")
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config(sim.base_url)))
    with fresh_database("cohere") as url:
        env = {"DATABASE_URL": url, "GOMODEL_CONFIG": str(path), "E2E_SIM_KEY": SIM_KEY, "CELERY_BROKER_URL": "",
               "GOMODEL_AUTH": "open", "GOMODEL_RETRY_BUDGET": "1.0"}
        with run_gateway(Path(tmp), env) as running:
            yield running


def last_usage(sim: SimulatorServer, model: str) -> dict[str, int]:
    sim.wait_until_idle()
    return sim.received(model=model)[-1]["usage"]


# -- Cohere through both SDKs ---------------------------------------------------------------------------


def test_openai_sdk_chat_to_cohere_counts_the_billed_units(oai: openai.OpenAI, sim: SimulatorServer) -> None:
    completion = oai.chat.completions.create(model="co/command-a", messages=[
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello Cohere"}])

    assert completion.model == "co/command-a"
    assert "Hello Cohere" in (completion.choices[0].message.content or "")
    assert completion.choices[0].finish_reason == "stop"
    usage = last_usage(sim, "command-a")
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == usage["input_tokens"]
    assert completion.usage.completion_tokens == usage["output_tokens"]


def test_openai_sdk_stream_from_cohere_arrives_chunk_by_chunk_with_usage(oai: openai.OpenAI) -> None:
    chunks = list(oai.chat.completions.create(model="co/command-a", stream=True,
                                              stream_options={"include_usage": True},
                                              messages=[{"role": "user", "content": "Stream to me"}]))

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "Stream to me" in text
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) >= 2
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens > 0


def test_openai_sdk_tool_call_and_json_schema_through_cohere(oai: openai.OpenAI) -> None:
    called = oai.chat.completions.create(
        model="co/command-a", messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=[{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}],
        tool_choice="required")
    call = called.choices[0].message.tool_calls[0]  # type: ignore[index]
    answered = oai.chat.completions.create(model="co/command-a", messages=[
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
    ], tools=[{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}])
    structured = oai.chat.completions.create(
        model="co/command-a", messages=[{"role": "user", "content": "Name someone"}],
        response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": ANSWER}})

    assert called.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "get_weather"  # type: ignore[union-attr]
    jsonschema.validate(json.loads(call.function.arguments), WEATHER)  # type: ignore[union-attr]
    assert answered.choices[0].finish_reason == "stop"
    assert answered.choices[0].message.content
    jsonschema.validate(json.loads(structured.choices[0].message.content or ""), ANSWER)


def test_openai_sdk_streamed_tool_call_from_cohere(oai: openai.OpenAI) -> None:
    chunks = list(oai.chat.completions.create(
        model="co/command-a", stream=True, messages=[{"role": "user", "content": "Weather?"}],
        tools=[{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}],
        tool_choice="required"))

    calls = [call for c in chunks if c.choices for call in (c.choices[0].delta.tool_calls or [])]
    assert calls[0].function.name == "get_weather"  # type: ignore[union-attr]
    jsonschema.validate(json.loads("".join(c.function.arguments or "" for c in calls)), WEATHER)  # type: ignore[union-attr]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"


def test_anthropic_sdk_message_stream_and_tools_through_cohere(claude: anthropic.Anthropic) -> None:
    message = claude.messages.create(model="co/command-a", max_tokens=200, system="Be brief.",
                                     messages=[{"role": "user", "content": "Hello from Claude"}])
    with claude.messages.stream(model="co/command-a", max_tokens=200,
                                messages=[{"role": "user", "content": "Stream please"}]) as stream:
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    tool = claude.messages.create(model="co/command-a", max_tokens=200, tool_choice={"type": "any"},
                                  tools=[{"name": "get_weather", "input_schema": WEATHER}],
                                  messages=[{"role": "user", "content": "Weather?"}])

    assert message.stop_reason == "end_turn"
    assert "Hello from Claude" in message.content[0].text  # type: ignore[union-attr]
    assert message.usage.input_tokens > 0
    assert "Stream please" in streamed
    assert final.usage.output_tokens > 0
    assert tool.stop_reason == "tool_use"
    block = next(b for b in tool.content if b.type == "tool_use")
    jsonschema.validate(block.input, WEATHER)


def test_a_request_cohere_cannot_take_is_a_400_naming_the_field(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        oai.chat.completions.create(model="co/command-a", messages=[{"role": "user", "content": "x"}], n=2)

    assert raised.value.body["param"] == "n"  # type: ignore[index]


# -- faults at the simulated Cohere ---------------------------------------------------------------------


def served_by(response: httpx2.Response) -> tuple[int, str | None]:
    return response.status_code, response.headers.get("x-gomodel-target")


def chat(gateway: Gateway, model: str, **extra: Any) -> httpx2.Response:
    body = {"model": model, "messages": [{"role": "user", "content": "fault test"}], **extra}
    return httpx2.post(f"{gateway.base_url}/v1/chat/completions", json=body, timeout=30)


def test_a_cohere_429_with_retry_after_falls_back(gateway: Gateway, sim: SimulatorServer) -> None:
    sim.clear_faults()
    sim.set_fault("rl-a", {"kind": "rate_limit", "retry_after": 2, "times": 1})

    assert served_by(chat(gateway, "rl-pool")) == (200, "co/rl-b")


def test_a_cohere_5xx_falls_back(gateway: Gateway, sim: SimulatorServer) -> None:
    sim.clear_faults()
    sim.set_fault("se-a", {"kind": "status", "status": 503, "times": 1})

    assert served_by(chat(gateway, "se-pool")) == (200, "co/se-b")


def test_a_malformed_cohere_answer_falls_back(gateway: Gateway, sim: SimulatorServer) -> None:
    sim.clear_faults()
    sim.set_fault("mj-a", {"kind": "malformed_json", "times": 1})

    response = chat(gateway, "mj-pool")

    assert served_by(response) == (200, "co/mj-b")
    assert response.json()["choices"][0]["message"]["content"]


def test_a_cohere_stream_dropped_before_the_first_byte_falls_back(gateway: Gateway, sim: SimulatorServer) -> None:
    sim.clear_faults()
    sim.set_fault("sc-a", {"kind": "stream_cut", "after_chunks": 0, "times": 1})

    response = chat(gateway, "sc-pool", stream=True)

    assert served_by(response) == (200, "co/sc-b")
    assert "data: [DONE]" in response.text


def test_a_cohere_stream_failing_mid_way_ends_with_an_error_event(gateway: Gateway, sim: SimulatorServer) -> None:
    sim.clear_faults()
    sim.set_fault("er-a", {"kind": "stream_error", "status": 500, "after_chunks": 2, "times": 1})

    response = chat(gateway, "co/er-a", stream=True)

    assert response.status_code == 200
    frames = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    assert json.loads(frames[-1])["error"]["type"]
    assert "data: [DONE]" not in response.text


# -- presets --------------------------------------------------------------------------------------------


def test_a_keyless_vllm_preset_answers_json_and_streams(oai: openai.OpenAI) -> None:
    completion = oai.chat.completions.create(model="local/local-llama",
                                             messages=[{"role": "user", "content": "Hi vLLM"}])
    chunks = list(oai.chat.completions.create(model="local/local-llama", stream=True,
                                              messages=[{"role": "user", "content": "Stream vLLM"}]))

    assert "Hi vLLM" in (completion.choices[0].message.content or "")
    assert "Stream vLLM" in "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def test_the_mistral_preset_refuses_logprobs_naming_it_and_answers_otherwise(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        oai.chat.completions.create(model="mi/mistral-small", messages=[{"role": "user", "content": "x"}],
                                    logprobs=True)
    answered = oai.chat.completions.create(model="mi/mistral-small", seed=3, max_completion_tokens=100,
                                           messages=[{"role": "user", "content": "Hi Mistral"}])

    assert raised.value.body["param"] == "logprobs"  # type: ignore[index]
    assert "Mistral" in raised.value.body["message"]  # type: ignore[index]
    assert "Hi Mistral" in (answered.choices[0].message.content or "")
