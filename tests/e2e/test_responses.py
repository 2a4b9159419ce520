"""The real openai SDK's Responses API (``client.responses``) against a running gateway and the simulator.

To an OpenAI-kind provider (called on its own /responses) and to an Anthropic-kind one (through chat): plain,
streamed (``create(stream=True)`` and ``responses.stream``), with a function tool and the follow-up carrying the
function_call_output, with a JSON schema (``text.format`` and ``responses.parse``), continued with
``previous_response_id`` (across provider kinds too), through a tier alias and a virtual model; the decision
headers, the audit revision's endpoint, bad input in OpenAI's envelope, and fuzzing for server errors.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import psycopg
import pydantic
import pytest
import schemathesis
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from psycopg.rows import dict_row
from schemathesis.generation import GenerationMode

from routing.simulator.server import SimulatorServer
from tests.e2e.conftest import SIM_KEY, fresh_database, gateway_config, manage
from tests.gateway_process import Gateway, run_gateway

pytestmark = pytest.mark.services

KINDS = [("oa/oa-model", "oa-model"), ("an/an-model", "an-model")]
# Gemini and Azure OpenAI as well: translated through chat like Anthropic.
EVERY_KIND = [*KINDS, ("ge/ge-model", "ge-model"), ("az/az-model", "az-model")]
WEATHER = {"type": "function", "name": "get_weather", "description": "The current weather of a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                          "additionalProperties": False}, "strict": True}
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "born": {"type": "integer"}},
          "required": ["name", "born"], "additionalProperties": False}


class Person(pydantic.BaseModel):
    name: str
    born: int


@pytest.fixture(scope="module")
def responses_gateway(simulator: SimulatorServer) -> Iterator[Gateway]:
    config = gateway_config(simulator.base_url)
    config["models"].append({"provider": "oa", "upstream": "oa-embed", "endpoints": ["embeddings"], "dimensions": 8,
                             "family": "sim-embed"})
    with tempfile.TemporaryDirectory() as tmp, fresh_database("responses") as url:
        path = Path(tmp) / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        env = {"DATABASE_URL": url, "GOMODEL_CONFIG": str(path), "E2E_SIM_KEY": SIM_KEY, "GOMODEL_MASTER_KEY": "",
               "GOMODEL_AUTH": "open", "CELERY_BROKER_URL": ""}
        with run_gateway(Path(tmp), env) as gateway:
            gateway.database_url = url  # type: ignore[attr-defined]
            yield gateway


@pytest.fixture
def oai(responses_gateway: Gateway, simulator: SimulatorServer) -> Iterator[openai.OpenAI]:
    simulator.clear_faults()
    with openai.OpenAI(base_url=f"{responses_gateway.base_url}/v1", api_key="unused-on-loopback",
                       max_retries=0) as client:
        yield client
    simulator.clear_faults()


def audit_row(gateway: Gateway, request_id: str, timeout: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    url = gateway.database_url.replace("postgres://", "postgresql://")  # type: ignore[attr-defined]
    with psycopg.connect(url, row_factory=dict_row) as conn:
        while True:
            row = conn.execute("SELECT * FROM audit_auditrevision WHERE request_id = %s", (request_id,)).fetchone()
            if row is not None:
                return row
            if time.monotonic() > deadline:
                raise AssertionError(f"no audit revision for {request_id}")
            time.sleep(0.1)


@pytest.mark.parametrize(("model", "upstream"), EVERY_KIND)
def test_a_plain_response(oai: openai.OpenAI, responses_gateway: Gateway, simulator: SimulatorServer, model: str,
                          upstream: str) -> None:
    simulator.reset()
    raw = oai.responses.with_raw_response.create(model=model, input="Say hello to Ada.", instructions="Be brief.")
    response = raw.parse()
    assert response.id.startswith("resp_")
    assert response.object == "response"
    assert (response.model, response.status) == (model, "completed")
    assert "Say hello to Ada." in response.output_text
    assert response.usage is not None
    assert response.usage.total_tokens > 0
    assert raw.headers["x-gomodel-target"] == model
    assert raw.headers["x-gomodel-attempts"] == "1"
    [received] = simulator.received(upstream)
    assert received["path"].endswith("/responses") == (upstream == "oa-model")
    row = audit_row(responses_gateway, raw.headers["x-request-id"])
    assert (row["endpoint"], row["target"], row["status"]) == ("responses", model, 200)


@pytest.mark.parametrize(("model", "upstream"), EVERY_KIND)
def test_a_streamed_response(oai: openai.OpenAI, responses_gateway: Gateway, model: str, upstream: str) -> None:
    with oai.responses.stream(model=model, input="Tell me a short story.") as stream:
        deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert len(deltas) > 1
    assert "".join(deltas) == final.output_text
    assert (final.model, final.status) == (model, "completed")
    assert final.usage is not None
    assert final.usage.output_tokens > 0
    kinds = [event.type for event in oai.responses.create(model=model, input="Again, please.", stream=True)]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert {"response.output_item.added", "response.content_part.added", "response.output_text.done",
            "response.content_part.done", "response.output_item.done"} <= set(kinds)


@pytest.mark.parametrize(("model", "upstream"), EVERY_KIND)
def test_a_function_tool_and_its_output(oai: openai.OpenAI, model: str, upstream: str) -> None:
    first = oai.responses.create(model=model, input="What is the weather in Oslo?", tools=[WEATHER],  # type: ignore[list-item]
                                 tool_choice="required")
    [call] = [item for item in first.output if item.type == "function_call"]
    assert call.name == "get_weather"
    assert "city" in json.loads(call.arguments)
    follow = oai.responses.create(model=model, previous_response_id=first.id, tools=[WEATHER],  # type: ignore[list-item]
                                  input=[{"type": "function_call_output", "call_id": call.call_id,
                                          "output": "4 C and light snow"}])
    assert follow.status == "completed"
    assert follow.output_text
    assert follow.previous_response_id == first.id
    # The stateless way: the client sends the whole conversation back itself, the call item as the SDK made it.
    stateless = oai.responses.create(model=model, tools=[WEATHER], store=False, input=[  # type: ignore[list-item]
        {"role": "user", "content": "What is the weather in Oslo?"}, call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "4 C and light snow"}])
    assert stateless.status == "completed"
    assert stateless.output_text


@pytest.mark.parametrize(("model", "upstream"), EVERY_KIND)
def test_a_json_schema_answer(oai: openai.OpenAI, model: str, upstream: str) -> None:
    response = oai.responses.create(model=model, input="Ada Lovelace, born 1815.", text={
        "format": {"type": "json_schema", "name": "person", "schema": PERSON, "strict": True}})
    person = json.loads(response.output_text)
    assert set(person) == {"name", "born"}
    assert isinstance(person["born"], int)
    parsed = oai.responses.parse(model=model, input="Ada Lovelace, born 1815.", text_format=Person)
    assert isinstance(parsed.output_parsed, Person)


@pytest.mark.parametrize(("model", "upstream"), KINDS)
def test_a_follow_up_with_previous_response_id(oai: openai.OpenAI, simulator: SimulatorServer, model: str,
                                               upstream: str) -> None:
    simulator.reset()
    first = oai.responses.create(model=model, input="My name is Ada.")
    follow = oai.responses.create(model=model, input="What is my name?", previous_response_id=first.id)
    assert follow.previous_response_id == first.id
    assert follow.output_text
    body = simulator.received(upstream)[-1]["body"]
    sent = json.dumps(body)
    assert "My name is Ada." in sent
    assert first.output_text in sent
    assert "What is my name?" in sent
    assert first.id not in sent  # the gateway's id never goes upstream
    # The conversation is the gateway's: it continues at another provider kind as well.
    other = next(name for name, _ in KINDS if name != model)
    across = oai.responses.create(model=other, input="And again?", previous_response_id=follow.id)
    assert across.status == "completed"


def test_an_unknown_previous_response_id_is_a_400_naming_it(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        oai.responses.create(model="oa/oa-model", input="hi", previous_response_id="resp_does_not_exist")
    assert refused.value.param == "previous_response_id"  # type: ignore[attr-defined]
    assert refused.value.body["type"] == "invalid_request_error"  # type: ignore[index]


def test_a_tier_alias_and_a_virtual_model(oai: openai.OpenAI, responses_gateway: Gateway) -> None:
    raw = oai.responses.with_raw_response.create(model="normal", input="hi")
    assert raw.headers["x-gomodel-pro-tier"] == "easy"
    assert raw.headers["x-gomodel-pro-tier-target"] == "oa/oa-model"
    assert raw.parse().model == "oa/oa-model"
    row = audit_row(responses_gateway, raw.headers["x-request-id"])
    assert row["endpoint"] == "responses"
    pooled = oai.responses.with_raw_response.create(model="pool", input="hi")
    assert pooled.headers["x-gomodel-target"] in ("oa/oa-model", "an/an-model")
    assert pooled.parse().model == pooled.headers["x-gomodel-target"]


def test_bad_input_is_a_400_in_openai_s_envelope(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        oai.responses.create(model="oa/oa-model", input="hi", tools=[{"type": "web_search"}])  # type: ignore[list-item]
    assert refused.value.param == "tools[0].type"  # type: ignore[attr-defined]
    with pytest.raises(openai.BadRequestError) as background:
        oai.responses.create(model="oa/oa-model", input="hi", background=True)
    assert background.value.param == "background"  # type: ignore[attr-defined]
    with pytest.raises(openai.BadRequestError) as embeddings_only:
        oai.responses.create(model="oa/oa-embed", input="hi")
    assert embeddings_only.value.param == "model"  # type: ignore[attr-defined]
    assert "does not serve the responses endpoint" in str(embeddings_only.value)


@pytest.fixture(scope="module")
def keyed_workers(simulator: SimulatorServer) -> Iterator[tuple[Gateway, str, str]]:
    """Two worker processes (granian) and two keys: a follow-up may reach the other worker than its response."""
    with tempfile.TemporaryDirectory() as tmp, fresh_database("responses_keys") as url:
        path = Path(tmp) / "config.yaml"
        path.write_text(yaml.safe_dump(gateway_config(simulator.base_url)))
        manage(url, "loadconfig", str(path), env={"E2E_SIM_KEY": SIM_KEY})
        alice = manage(url, "createkey", "alice").strip()
        bob = manage(url, "createkey", "bob").strip()
        env = {"DATABASE_URL": url, "E2E_SIM_KEY": SIM_KEY, "GOMODEL_MASTER_KEY": "", "CELERY_BROKER_URL": ""}
        with run_gateway(Path(tmp), env, server="granian") as gateway:
            yield gateway, alice, bob


def test_follow_ups_reach_any_worker_and_only_their_own_key(keyed_workers: tuple[Gateway, str, str]) -> None:
    gateway, alice, bob = keyed_workers
    url = f"{gateway.base_url}/v1"
    # Two clients of one key, so the first request and its follow-up travel on different connections (and often
    # to different workers); each follow-up is sent the moment its response arrived.
    with openai.OpenAI(base_url=url, api_key=alice, max_retries=0) as mine, \
            openai.OpenAI(base_url=url, api_key=alice, max_retries=0) as mine_again, \
            openai.OpenAI(base_url=url, api_key=bob, max_retries=0) as theirs:
        for turn in range(8):
            first = mine.responses.create(model="oa/oa-model", input=f"Remember the number {turn}.")
            follow = mine_again.responses.create(model="an/an-model", input="Which number?",
                                                 previous_response_id=first.id)
            assert follow.previous_response_id == first.id
        with pytest.raises(openai.BadRequestError) as refused:
            theirs.responses.create(model="oa/oa-model", input="Which number?", previous_response_id=first.id)
    assert refused.value.param == "previous_response_id"  # type: ignore[attr-defined]


def fuzz_spec() -> dict[str, Any]:
    spec = yaml.safe_load((Path(__file__).resolve().parents[2] / "routing" / "api" / "openapi.yaml").read_text())
    spec["components"]["schemas"]["ResponsesRequest"]["properties"]["model"] = {
        "type": "string", "enum": ["oa/oa-model", "an/an-model", "normal", "pool", "oa/oa-embed", "no-such-model"]}
    spec["components"]["parameters"]["Deadline"]["schema"] = {"type": "integer", "minimum": 10000, "maximum": 60000}
    return spec


@pytest.mark.slow
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["valid", "invalid"])
def test_no_input_gets_a_server_error(responses_gateway: Gateway, mode: GenerationMode) -> None:
    operation = schemathesis.openapi.from_dict(fuzz_spec())["/v1/responses"]["POST"]
    seen: list[int] = []

    @given(operation.as_strategy(generation_mode=mode))
    @settings(max_examples=40, deadline=None, database=None, phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck))
    def fuzz(case: Any) -> None:
        response = case.call(base_url=responses_gateway.base_url, timeout=30)
        seen.append(response.status_code)
        assert response.status_code < 500, f"{response.status_code}: {response.text[:300]}\n{case.as_curl_command()}"
        if response.status_code >= 400:
            assert "error" in response.json()  # always the client's error envelope, never a traceback

    fuzz()
    assert seen
