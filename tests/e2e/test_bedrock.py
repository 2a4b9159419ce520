"""The real openai and anthropic SDKs against a running gateway routed to the simulator's Amazon Bedrock: Converse
signed with SigV4 from key references, an API key as a bearer token, the binary event stream translated to SSE,
tools and JSON schemas, Titan and Cohere embeddings, faults, and a provider without credentials."""

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

from routing.simulator.recorder import key_fingerprint
from routing.simulator.server import SimulatorServer
from tests.e2e.conftest import SIM_KEY, fresh_database
from tests.gateway_process import Gateway, run_gateway

pytestmark = pytest.mark.services

AWS_KEY_ID, AWS_SECRET, AWS_TOKEN = "AKIDE2ETEST000000001", "e2e-secret-access-key", "e2e-session-token"
HAIKU = "anthropic.claude-3-haiku-20240307-v1:0"
NOVA = "amazon.nova-lite-v1:0"
TITAN = "amazon.titan-embed-text-v2:0"
COHERE = "cohere.embed-english-v3"
POOLED = ("rl-a", "rl-b", "er-a", "mj-a", "mj-b", "sc-a", "sc-b")
SIM_MODELS = {name: {"latency_ms": 2, "chunk_count": 4}
              for name in (HAIKU, NOVA, *(f"anthropic.{pooled}" for pooled in POOLED))}
# The mid-stream error must come after content the gateway has relayed (see test_cohere_and_presets.py).
SIM_MODELS["anthropic.er-a"]["chunk_interval_ms"] = 200
SIM_MODELS[TITAN] = {"dimensions": 256}
SIM_MODELS[COHERE] = {"dimensions": 8}
CAPS = ["text", "image", "tools", "json_schema"]
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
ANSWER = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


def config(sim_url: str) -> dict[str, Any]:
    cloud = {"kind": "bedrock", "base_url": sim_url, "region": "us-east-1"}
    return {
        "providers": [
            {"name": "br", **cloud, "aws_access_key_id": "${E2E_AWS_KEY_ID}",
             "aws_secret_access_key": "${E2E_AWS_SECRET}", "aws_session_token": "${E2E_AWS_TOKEN}"},
            {"name": "brk", **cloud, "api_key": "${E2E_SIM_KEY}"},
            {"name": "brn", **cloud},  # no key, no key pair: the AWS credential chain, empty in this process
        ],
        "models": [
            {"provider": "br", "upstream": HAIKU, "name": "br/haiku", "capabilities": CAPS, "input_price": 0.25,
             "output_price": 1.25},
            {"provider": "brk", "upstream": NOVA, "name": "brk/nova", "capabilities": CAPS},
            {"provider": "brn", "upstream": HAIKU, "name": "brn/haiku", "capabilities": CAPS},
            *({"provider": "br", "upstream": f"anthropic.{name}", "name": f"br/{name}", "capabilities": CAPS}
              for name in POOLED),
            {"provider": "br", "upstream": TITAN, "name": "br/titan", "endpoints": ["embeddings"], "dimensions": 256,
             "family": "titan-v2"},
            {"provider": "brk", "upstream": COHERE, "name": "brk/cohere", "endpoints": ["embeddings"],
             "dimensions": 8, "family": "cohere-v3"},
        ],
        "virtual_models": [{"source": f"br-{pair}-pool", "strategy": "failover",
                            "targets": [f"br/{pair}-a", f"br/{pair}-b"]} for pair in ("rl", "mj", "sc")],
    }


@pytest.fixture(scope="module")
def sim() -> Iterator[SimulatorServer]:
    with SimulatorServer(config={"models": SIM_MODELS}) as server:
        yield server


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, sim: SimulatorServer) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp("bedrock")
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config(sim.base_url)))
    with fresh_database("bedrock") as url:
        env = {"DATABASE_URL": url, "GOMODEL_CONFIG": str(path), "E2E_SIM_KEY": SIM_KEY, "CELERY_BROKER_URL": "",
               "GOMODEL_AUTH": "open", "GOMODEL_RETRY_BUDGET": "1.0", "E2E_AWS_KEY_ID": AWS_KEY_ID,
               "E2E_AWS_SECRET": AWS_SECRET, "E2E_AWS_TOKEN": AWS_TOKEN,
               # The credential chain of the gateway process finds nothing: no variables, files or instance role.
               "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
               "AWS_CONFIG_FILE": str(tmp / "no-aws-config"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp / "no-aws-creds"),
               "AWS_EC2_METADATA_DISABLED": "true"}
        with run_gateway(Path(tmp), env) as running:
            yield running


def last_record(sim: SimulatorServer, model: str) -> dict[str, Any]:
    sim.wait_until_idle()
    return sim.received(model)[-1]


# -- chat through both SDKs -----------------------------------------------------------------------------


def test_openai_sdk_chat_is_signed_with_sigv4_and_counts_bedrocks_usage(oai: openai.OpenAI,
                                                                        sim: SimulatorServer) -> None:
    completion = oai.chat.completions.create(model="br/haiku", messages=[
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Hello Bedrock"},
                                     {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]}])

    assert completion.model == "br/haiku"
    assert "Hello Bedrock" in (completion.choices[0].message.content or "")
    assert completion.choices[0].finish_reason == "stop"
    record = last_record(sim, HAIKU)
    assert record["path"] == f"/model/{HAIKU}/converse"
    assert record["auth"]["fingerprint"] == key_fingerprint(AWS_KEY_ID)  # the signature's access key id
    assert record["headers"]["x-amz-security-token"] == "***"
    assert record["body"]["system"] == [{"text": "Be brief."}]
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == record["usage"]["input_tokens"]
    assert completion.usage.completion_tokens == record["usage"]["output_tokens"]
    assert AWS_SECRET not in json.dumps(sim.received())


def test_openai_sdk_stream_from_the_event_stream_arrives_chunk_by_chunk_with_usage(oai: openai.OpenAI) -> None:
    chunks = list(oai.chat.completions.create(model="br/haiku", stream=True, stream_options={"include_usage": True},
                                              messages=[{"role": "user", "content": "Stream to me"}]))

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "Stream to me" in text
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) >= 2
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens > 0


def test_openai_sdk_tools_and_json_schema_through_converse(oai: openai.OpenAI) -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
    called = oai.chat.completions.create(model="br/haiku", messages=[{"role": "user", "content": "Weather in Oslo?"}],
                                         tools=tools, tool_choice="required")  # type: ignore[arg-type]
    call = called.choices[0].message.tool_calls[0]  # type: ignore[index]
    answered = oai.chat.completions.create(model="br/haiku", messages=[
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
    ], tools=tools)  # type: ignore[arg-type]
    structured = oai.chat.completions.create(
        model="br/haiku", messages=[{"role": "user", "content": "Name someone"}],
        response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": ANSWER}})
    streamed = list(oai.chat.completions.create(model="br/haiku", stream=True, tools=tools,  # type: ignore[arg-type]
                                                tool_choice="required",
                                                messages=[{"role": "user", "content": "Weather?"}]))

    assert called.choices[0].finish_reason == "tool_calls"
    jsonschema.validate(json.loads(call.function.arguments), WEATHER)  # type: ignore[union-attr]
    assert answered.choices[0].finish_reason == "stop"
    assert answered.choices[0].message.content
    assert structured.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(structured.choices[0].message.content or ""), ANSWER)
    deltas = [d for c in streamed if c.choices for d in (c.choices[0].delta.tool_calls or [])]
    assert deltas[0].function.name == "get_weather"  # type: ignore[union-attr]
    jsonschema.validate(json.loads("".join(d.function.arguments or "" for d in deltas)), WEATHER)  # type: ignore[union-attr]


def test_anthropic_sdk_message_stream_and_tools_through_converse(claude: anthropic.Anthropic) -> None:
    message = claude.messages.create(model="br/haiku", max_tokens=200, system="Be brief.",
                                     messages=[{"role": "user", "content": "Hello from Claude"}])
    with claude.messages.stream(model="br/haiku", max_tokens=200,
                                messages=[{"role": "user", "content": "Stream please"}]) as stream:
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    tool = claude.messages.create(model="br/haiku", max_tokens=200, tool_choice={"type": "any"},
                                  tools=[{"name": "get_weather", "input_schema": WEATHER}],
                                  messages=[{"role": "user", "content": "Weather?"}])
    with claude.messages.stream(model="br/haiku", max_tokens=200, tool_choice={"type": "any"},
                                tools=[{"name": "get_weather", "input_schema": WEATHER}],
                                messages=[{"role": "user", "content": "Weather?"}]) as stream:
        streamed_tool = stream.get_final_message()

    assert message.stop_reason == "end_turn"
    assert "Hello from Claude" in message.content[0].text  # type: ignore[union-attr]
    assert message.usage.input_tokens > 0
    assert "Stream please" in streamed
    assert final.usage.output_tokens > 0
    assert tool.stop_reason == "tool_use"
    jsonschema.validate(next(b for b in tool.content if b.type == "tool_use").input, WEATHER)
    assert streamed_tool.stop_reason == "tool_use"
    jsonschema.validate(next(b for b in streamed_tool.content if b.type == "tool_use").input, WEATHER)


def test_an_api_key_provider_sends_a_bearer_token_and_no_signature(oai: openai.OpenAI, sim: SimulatorServer) -> None:
    completion = oai.chat.completions.create(model="brk/nova", messages=[{"role": "user", "content": "Hi Nova"}])

    assert "Hi Nova" in (completion.choices[0].message.content or "")
    record = last_record(sim, NOVA)
    assert record["auth"]["fingerprint"] == key_fingerprint(SIM_KEY)
    assert "x-amz-date" not in record["headers"]


def test_what_converse_cannot_take_is_a_400_naming_the_field(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        oai.chat.completions.create(model="br/haiku", messages=[{"role": "user", "content": "x"}], seed=7)

    assert raised.value.body["param"] == "seed"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as refused:  # Bedrock's own ValidationException, relayed
        oai.chat.completions.create(model="br/haiku", messages=[{"role": "assistant", "content": "I start"}])
    assert "must start with a user message" in refused.value.message


def test_a_provider_without_credentials_fails_as_a_configuration_error(gateway: Gateway,
                                                                       sim: SimulatorServer) -> None:
    before = len(sim.received(HAIKU))
    response = httpx2.post(f"{gateway.base_url}/v1/chat/completions", timeout=30,
                           json={"model": "brn/haiku", "messages": [{"role": "user", "content": "x"}]})

    assert response.status_code >= 500
    assert response.json()["error"]["message"]
    assert len(sim.received(HAIKU)) == before  # nothing was sent
    assert gateway.process.poll() is None
    assert AWS_SECRET not in gateway.log_path.read_text()


# -- embeddings -----------------------------------------------------------------------------------------


def test_titan_and_cohere_embeddings_through_invoke_model(oai: openai.OpenAI) -> None:
    titan = oai.embeddings.create(model="br/titan", input="hello world")
    cohere = oai.embeddings.create(model="brk/cohere", input=["a", "bb"])

    assert len(titan.data[0].embedding) == 256
    assert titan.usage.prompt_tokens == 3
    assert [len(item.embedding) for item in cohere.data] == [8, 8]
    with pytest.raises(openai.BadRequestError) as raised:
        oai.embeddings.create(model="br/titan", input=["one", "two"])
    assert raised.value.body["param"] == "input"  # type: ignore[index]


# -- faults ---------------------------------------------------------------------------------------------


def test_a_throttled_model_falls_back_and_a_stream_failing_mid_way_ends_with_an_error(
        gateway: Gateway, sim: SimulatorServer) -> None:
    sim.clear_faults()
    sim.set_fault("anthropic.rl-a", {"kind": "rate_limit", "times": 1})
    response = httpx2.post(f"{gateway.base_url}/v1/chat/completions", timeout=30,
                           json={"model": "br-rl-pool", "messages": [{"role": "user", "content": "x"}]})
    assert (response.status_code, response.headers.get("x-gomodel-target")) == (200, "br/rl-b")

    sim.set_fault("anthropic.er-a", {"kind": "stream_error", "status": 500, "after_chunks": 2, "times": 1})
    streamed = httpx2.post(f"{gateway.base_url}/v1/chat/completions", timeout=30,
                           json={"model": "br/er-a", "stream": True,
                                 "messages": [{"role": "user", "content": "a longer answer please"}]})
    assert streamed.status_code == 200
    frames = [line[6:] for line in streamed.text.splitlines() if line.startswith("data: ")]
    assert json.loads(frames[-1])["error"]["type"]
    assert "data: [DONE]" not in streamed.text


@pytest.mark.parametrize(("pair", "fault"), [
    ("mj", {"kind": "malformed_json", "times": 1}),  # a frame whose CRC cannot match
    ("sc", {"kind": "stream_cut", "after_chunks": 0, "times": 1}),  # dropped before the first content frame
])
def test_a_broken_event_stream_before_the_first_byte_falls_back(gateway: Gateway, sim: SimulatorServer, pair: str,
                                                                fault: dict[str, Any]) -> None:
    sim.clear_faults()
    sim.set_fault(f"anthropic.{pair}-a", fault)

    response = httpx2.post(f"{gateway.base_url}/v1/chat/completions", timeout=30,
                           json={"model": f"br-{pair}-pool", "stream": True,
                                 "messages": [{"role": "user", "content": "x"}]})

    assert (response.status_code, response.headers.get("x-gomodel-target")) == (200, f"br/{pair}-b")
    assert "data: [DONE]" in response.text
