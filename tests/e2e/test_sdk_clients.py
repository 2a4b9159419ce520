"""The real openai and anthropic SDKs against a running gateway, through every adapter, both inbound shapes."""

from __future__ import annotations

import base64
import json

import anthropic
import jsonschema
import openai
import pytest

pytestmark = pytest.mark.services

TARGETS = ["oa/oa-model", "az/az-model", "an/an-model", "ge/ge-model"]
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")).decode()
WEATHER_TOOL_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"},
                                                        "unit": {"type": "string", "enum": ["c", "f"]}},
                       "required": ["city", "unit"]}
ANSWER_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                 "required": ["name", "age"], "additionalProperties": False}


@pytest.mark.parametrize("target", TARGETS)
def test_openai_sdk_plain(oai: openai.OpenAI, target: str) -> None:
    raw = oai.chat.completions.with_raw_response.create(
        model=target, messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}])
    completion = raw.parse()
    assert raw.headers["x-gomodel-target"] == target
    assert raw.headers["x-gomodel-attempts"] == "1"
    assert "Hello there" in completion.choices[0].message.content
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.completion_tokens > 0
    assert float(raw.headers["x-gomodel-cost-usd"]) > 0


@pytest.mark.parametrize("target", TARGETS)
def test_openai_sdk_streaming(oai: openai.OpenAI, target: str) -> None:
    stream = oai.chat.completions.create(model=target, stream=True, stream_options={"include_usage": True},
                                         messages=[{"role": "user", "content": "Stream to me"}])
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "Stream to me" in text
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens > 0


@pytest.mark.parametrize("target", TARGETS)
def test_openai_sdk_tools(oai: openai.OpenAI, target: str) -> None:
    completion = oai.chat.completions.create(
        model=target, messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=[{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                                 "parameters": WEATHER_TOOL_SCHEMA}}],
        tool_choice="required")
    message = completion.choices[0].message
    assert completion.choices[0].finish_reason == "tool_calls"
    assert [c.function.name for c in message.tool_calls] == ["get_weather"]
    jsonschema.validate(json.loads(message.tool_calls[0].function.arguments), WEATHER_TOOL_SCHEMA)

    # The tool result goes back in the next turn, translated for the target.
    call = message.tool_calls[0]
    follow_up = oai.chat.completions.create(model=target, messages=[
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "18 degrees"},
    ], tools=[{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_TOOL_SCHEMA}}])
    assert follow_up.choices[0].message.content


@pytest.mark.parametrize("target", TARGETS)
def test_openai_sdk_image(oai: openai.OpenAI, target: str, sim) -> None:  # type: ignore[no-untyped-def]
    sim.reset()
    completion = oai.chat.completions.create(model=target, messages=[{"role": "user", "content": [
        {"type": "text", "text": "What is in this picture?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    ]}])
    assert completion.choices[0].message.content
    sent = json.dumps(sim.received()[-1]["body"])
    assert PNG in sent  # the image reached the provider, in its own format


@pytest.mark.parametrize("target", TARGETS)
def test_openai_sdk_json_schema(oai: openai.OpenAI, target: str) -> None:
    completion = oai.chat.completions.create(
        model=target, messages=[{"role": "user", "content": "Give me a person"}],
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": ANSWER_SCHEMA,
                                                                "strict": True}})
    jsonschema.validate(json.loads(completion.choices[0].message.content), ANSWER_SCHEMA)


@pytest.mark.parametrize("target", TARGETS)
def test_anthropic_sdk_plain(claude: anthropic.Anthropic, target: str) -> None:
    raw = claude.messages.with_raw_response.create(
        model=target, max_tokens=200, system="Be brief.", messages=[{"role": "user", "content": "Hello there"}])
    message = raw.parse()
    assert raw.headers["x-gomodel-target"] == target
    assert message.content[0].type == "text"
    assert "Hello there" in message.content[0].text
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens > 0


@pytest.mark.parametrize("target", TARGETS)
def test_anthropic_sdk_streaming(claude: anthropic.Anthropic, target: str) -> None:
    with claude.messages.stream(model=target, max_tokens=200,
                                messages=[{"role": "user", "content": "Stream to me"}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert "Stream to me" in text
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens > 0


@pytest.mark.parametrize("target", TARGETS)
def test_anthropic_sdk_tools(claude: anthropic.Anthropic, target: str) -> None:
    message = claude.messages.create(
        model=target, max_tokens=200, messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=[{"name": "get_weather", "description": "Weather for a city", "input_schema": WEATHER_TOOL_SCHEMA}],
        tool_choice={"type": "any"})
    uses = [block for block in message.content if block.type == "tool_use"]
    assert message.stop_reason == "tool_use"
    assert [u.name for u in uses] == ["get_weather"]
    jsonschema.validate(uses[0].input, WEATHER_TOOL_SCHEMA)
    follow_up = claude.messages.create(model=target, max_tokens=200, messages=[
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [u.model_dump() for u in uses]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id, "content": "18 degrees"}]},
    ], tools=[{"name": "get_weather", "input_schema": WEATHER_TOOL_SCHEMA}])
    assert follow_up.content


@pytest.mark.parametrize("target", TARGETS)
def test_anthropic_sdk_image(claude: anthropic.Anthropic, target: str, sim) -> None:  # type: ignore[no-untyped-def]
    sim.reset()
    message = claude.messages.create(model=target, max_tokens=200, messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "text", "text": "What is in this picture?"},
    ]}])
    assert message.content[0].text
    assert PNG in json.dumps(sim.received()[-1]["body"])


@pytest.mark.parametrize("target", TARGETS)
def test_anthropic_sdk_json_schema(claude: anthropic.Anthropic, target: str) -> None:
    message = claude.messages.create(
        model=target, max_tokens=300, messages=[{"role": "user", "content": "Give me a person"}],
        extra_body={"output_format": {"type": "json_schema", "schema": ANSWER_SCHEMA}})
    text = "".join(block.text for block in message.content if block.type == "text")
    jsonschema.validate(json.loads(text), ANSWER_SCHEMA)


def test_an_image_to_a_text_only_model_is_refused_naming_the_capability(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        oai.chat.completions.create(model="oa/text-only", messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]}])
    assert "image" in caught.value.message


def test_models_lists_aliases_virtual_and_concrete_models(oai: openai.OpenAI) -> None:
    names = {m.id for m in oai.models.list()}
    assert {"normal", "pool", "oa/oa-model", "ge/ge-model"} <= names
