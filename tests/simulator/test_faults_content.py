"""Faults in what a 200 says: truncate, schema_violation, unknown_tool, empty; in every wire format, JSON and SSE."""

from __future__ import annotations

import json
from typing import Any

import httpx2 as httpx
import jsonschema
import pytest

from routing.simulator import SimulatorServer
from tests.simulator.wire_helpers import (
    WEATHER_TOOL_SCHEMA,
    WIRES,
    answer_of,
    request_for,
    response_schema_for,
    tools_for,
)

LENGTH = {"openai": "length", "azure": "length", "anthropic": "max_tokens", "gemini": "MAX_TOKENS"}
NATURAL = {"openai": "stop", "azure": "stop", "anthropic": "end_turn", "gemini": "STOP"}
BOTH = [(wire, stream) for wire in WIRES for stream in (False, True)]


def answer(client: httpx.Client, wire: str, model: str, *, stream: bool, **extra: Any) -> dict[str, Any]:
    path, headers, body = request_for(wire, model, stream=stream, **extra)
    response = client.post(path, json=body, headers=headers)
    assert response.status_code == 200, response.text
    return answer_of(wire, response.text, stream=stream)


@pytest.mark.parametrize(("wire", "stream"), BOTH)
def test_truncate_cuts_the_answer_and_reports_the_length_finish(sim: SimulatorServer, client: httpx.Client,
                                                                wire: str, stream: bool) -> None:
    full = answer(client, wire, "m", stream=stream)
    sim.set_fault("m", {"kind": "truncate", "times": 1})

    cut = answer(client, wire, "m", stream=stream)

    assert full["finish"] == NATURAL[wire]
    assert cut["finish"] == LENGTH[wire]
    assert cut["text"]
    assert len(cut["text"]) < len(full["text"])
    assert cut["text"] == full["text"].replace("answer 1", "answer 2")[: len(cut["text"])]


def test_truncate_cuts_tool_arguments_so_they_no_longer_parse(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("m", {"kind": "truncate"})

    cut = answer(client, "openai", "m", stream=False, **tools_for("openai", WEATHER_TOOL_SCHEMA))

    assert cut["finish"] == "length"
    with pytest.raises(ValueError):
        json.loads(cut["tools"][0][1])


@pytest.mark.parametrize(("wire", "stream"), BOTH)
def test_schema_violation_sends_tool_arguments_missing_a_required_field(sim: SimulatorServer, client: httpx.Client,
                                                                        wire: str, stream: bool) -> None:
    sim.set_fault("m", {"kind": "schema_violation"})

    calls = answer(client, wire, "m", stream=stream, **tools_for(wire, WEATHER_TOOL_SCHEMA))["tools"]

    arguments = json.loads(calls[0][1])
    assert calls[0][0] == "get_weather"
    assert "city" not in arguments  # the first required property
    with pytest.raises(jsonschema.ValidationError, match="'city' is a required property"):
        jsonschema.validate(arguments, WEATHER_TOOL_SCHEMA)


@pytest.mark.parametrize("wire", WIRES)
def test_schema_violation_sends_structured_output_missing_a_required_field(sim: SimulatorServer,
                                                                           client: httpx.Client, wire: str) -> None:
    schema = {"type": "object", "properties": {"invoice_id": {"type": "string"}, "total": {"type": "number"}},
              "required": ["invoice_id", "total"]}
    valid = json.loads(answer(client, wire, "m", stream=False, **response_schema_for(wire, schema))["text"])
    sim.set_fault("m", {"kind": "schema_violation"})

    broken = json.loads(answer(client, wire, "m", stream=False, **response_schema_for(wire, schema))["text"])

    jsonschema.validate(valid, schema)
    assert broken == {"total": 0}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


@pytest.mark.parametrize(("wire", "stream"), BOTH)
def test_unknown_tool_calls_a_tool_the_request_did_not_declare(sim: SimulatorServer, client: httpx.Client,
                                                               wire: str, stream: bool) -> None:
    sim.set_fault("m", {"kind": "unknown_tool"})

    calls = answer(client, wire, "m", stream=stream, **tools_for(wire, WEATHER_TOOL_SCHEMA))["tools"]

    assert [name for name, _ in calls] == ["undeclared_tool"]


def test_unknown_tool_never_picks_a_declared_name(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("m", {"kind": "unknown_tool", "tool": "get_weather"})

    calls = answer(client, "anthropic", "m", stream=False, **tools_for("anthropic", WEATHER_TOOL_SCHEMA))["tools"]

    assert calls[0][0] == "get_weather_2"


@pytest.mark.parametrize(("wire", "stream"), BOTH)
def test_empty_answers_200_with_no_content(sim: SimulatorServer, client: httpx.Client, wire: str,
                                           stream: bool) -> None:
    sim.set_fault("m", {"kind": "empty"})

    empty = answer(client, wire, "m", stream=stream)

    assert empty["text"] == ""
    assert empty["tools"] == []
    assert empty["finish"] == NATURAL[wire]
    sim.wait_until_idle()
    assert sim.received("m")[-1]["usage"]["output_tokens"] == 0
