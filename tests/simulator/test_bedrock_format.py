"""The Bedrock runtime wire: Converse JSON, ConverseStream event-stream frames, SigV4 or bearer authentication,
tools, Bedrock's errors (x-amzn-ErrorType, no Retry-After), and InvokeModel embeddings for Titan and Cohere."""

from __future__ import annotations

import json
from typing import Any

import httpx2 as httpx
import jsonschema
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from routing.providers.bedrock.eventstream import EventStreamParser
from routing.simulator import SimulatorServer
from tests.simulator.wire_helpers import WEATHER_TOOL_SCHEMA

BEARER = {"authorization": "Bearer bedrock-api-key-test"}
MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
PATH = "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse"
WEATHER_TOOLS = {"tools": [{"toolSpec": {"name": "get_weather", "inputSchema": {"json": WEATHER_TOOL_SCHEMA}}}],
                 "toolChoice": {"any": {}}}


def body(text: str = "Hello Bedrock", **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": [{"text": text}]}], **extra}


def frames(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    parser = EventStreamParser()
    events = parser.feed(response.content) + parser.flush()
    return [(event.event or "", json.loads(event.data or "{}")) for event in events]


def signed(url: str, payload: bytes, *, token: str | None = None) -> dict[str, str]:
    request = AWSRequest(method="POST", url=url, data=payload, headers={"Content-Type": "application/json"})
    SigV4Auth(Credentials("AKIDEXAMPLE12345678", "secret-example", token), "bedrock", "us-east-1").add_auth(request)
    return dict(request.headers.items())


def test_it_answers_converse_with_content_stop_reason_and_usage(client: httpx.Client) -> None:
    response = client.post(PATH, json=body(), headers=BEARER)

    assert response.status_code == 200
    assert response.headers["x-amzn-requestid"]
    answer = response.json()
    assert answer["output"]["message"] == {"role": "assistant",
                                           "content": [{"text": f"Simulated answer 1 from {MODEL}: Hello Bedrock"}]}
    assert answer["stopReason"] == "end_turn"
    usage = answer["usage"]
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]


def test_it_streams_event_stream_frames_ending_with_message_stop_and_metadata(client: httpx.Client) -> None:
    response = client.post(PATH.replace("/converse", "/converse-stream"), json=body(), headers=BEARER)

    assert response.headers["content-type"] == "application/vnd.amazon.eventstream"
    stream = frames(response)
    kinds = [kind for kind, _ in stream]
    assert kinds[0] == "messageStart"
    assert kinds[-3:] == ["contentBlockStop", "messageStop", "metadata"]
    text = "".join(data["delta"]["text"] for kind, data in stream if kind == "contentBlockDelta")
    assert text == f"Simulated answer 1 from {MODEL}: Hello Bedrock"
    assert stream[-2][1]["stopReason"] == "end_turn"
    assert stream[-1][1]["usage"]["outputTokens"] == (len(text) + 3) // 4


def test_it_calls_a_forced_tool_and_streams_its_input_in_fragments(client: httpx.Client) -> None:
    answer = client.post(PATH, json=body(toolConfig=WEATHER_TOOLS), headers=BEARER).json()
    assert answer["stopReason"] == "tool_use"
    [use] = [block["toolUse"] for block in answer["output"]["message"]["content"] if "toolUse" in block]
    jsonschema.validate(use["input"], WEATHER_TOOL_SCHEMA)

    stream = frames(client.post(PATH.replace("/converse", "/converse-stream"), json=body(toolConfig=WEATHER_TOOLS),
                                headers=BEARER))
    [start] = [data["start"]["toolUse"] for kind, data in stream if kind == "contentBlockStart"]
    assert start["name"] == "get_weather"
    fragments = [data["delta"]["toolUse"]["input"] for kind, data in stream
                 if kind == "contentBlockDelta" and "toolUse" in data["delta"]]
    assert len(fragments) > 1
    jsonschema.validate(json.loads("".join(fragments)), WEATHER_TOOL_SCHEMA)


def test_it_accepts_a_well_formed_sigv4_signature_and_refuses_anything_else(sim: SimulatorServer,
                                                                             client: httpx.Client) -> None:
    payload = json.dumps(body()).encode()
    ok = client.post(PATH, content=payload, headers=signed(f"{sim.base_url}{PATH}", payload, token="session-token"))
    assert ok.status_code == 200

    missing = client.post(PATH, json=body())
    assert missing.status_code == 403
    assert missing.json() == {"message": "Missing Authentication Token"}
    assert missing.headers["x-amzn-errortype"].startswith("MissingAuthenticationTokenException:")

    headers = signed(f"{sim.base_url}{PATH}", payload)
    headers["Authorization"] = headers["Authorization"].replace("Signature=", "Signature=zz")
    malformed = client.post(PATH, content=payload, headers=headers)
    assert malformed.status_code == 403
    assert malformed.headers["x-amzn-errortype"].startswith("InvalidSignatureException:")
    headers = signed(f"{sim.base_url}{PATH}", payload)
    del headers["X-Amz-Date"]
    assert client.post(PATH, content=payload, headers=headers).status_code == 403
    [record] = [r for r in sim.received() if r["status"] == 200]
    assert "session-token" not in json.dumps(record)


def test_it_refuses_what_converse_refuses(client: httpx.Client) -> None:
    not_alternating = {"messages": [{"role": "user", "content": [{"text": "a"}]},
                                    {"role": "user", "content": [{"text": "b"}]}]}
    tool_without_config = {"messages": [
        {"role": "user", "content": [{"text": "a"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "f", "input": {}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "r"}]}}]}]}
    for refused, words in ((not_alternating, "alternate"), (tool_without_config, "toolConfig"),
                           (body(""), "blank")):
        response = client.post(PATH, json=refused, headers=BEARER)
        assert response.status_code == 400
        assert response.headers["x-amzn-errortype"].startswith("ValidationException:")
        assert words in response.json()["message"]


def test_faults_answer_as_bedrock_does(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault(MODEL, {"kind": "rate_limit", "retry_after": 3, "times": 1})
    throttled = client.post(PATH, json=body(), headers=BEARER)
    assert throttled.status_code == 429
    assert throttled.headers["x-amzn-errortype"].startswith("ThrottlingException:")
    assert "retry-after" not in throttled.headers

    sim.set_fault(MODEL, {"kind": "context_overflow", "times": 1})
    overflow = client.post(PATH, json=body(), headers=BEARER)
    assert overflow.status_code == 400
    assert overflow.json()["message"].startswith("Input is too long for requested model.")

    sim.set_fault(MODEL, {"kind": "status", "status": 503, "times": 1})
    assert client.post(PATH, json=body(), headers=BEARER).headers["x-amzn-errortype"].startswith(
        "ServiceUnavailableException:")

    sim.set_fault(MODEL, {"kind": "stream_error", "after_chunks": 1, "status": 500, "times": 1})
    stream = frames(client.post(PATH.replace("/converse", "/converse-stream"), json=body(), headers=BEARER))
    assert stream[-1][0] == "exception:internalServerException"
    assert "messageStop" not in [kind for kind, _ in stream]


def test_it_embeds_with_titan_one_text_per_call(client: httpx.Client) -> None:
    path = "/model/amazon.titan-embed-text-v2%3A0/invoke"
    answer = client.post(path, json={"inputText": "hello world", "dimensions": 256, "normalize": True},
                         headers=BEARER).json()
    assert len(answer["embedding"]) == 256
    assert answer["inputTextTokenCount"] == 3
    refused = client.post(path, json={"texts": ["a"]}, headers=BEARER)
    assert refused.status_code == 400
    assert refused.headers["x-amzn-errortype"].startswith("ValidationException:")


def test_it_embeds_with_cohere_a_batch_of_texts(client: httpx.Client) -> None:
    path = "/model/cohere.embed-english-v3/invoke"
    answer = client.post(path, json={"texts": ["a", "b"], "input_type": "search_document",
                                     "embedding_types": ["float"]}, headers=BEARER).json()
    assert answer["response_type"] == "embeddings_by_type"
    assert len(answer["embeddings"]["float"]) == 2
    assert answer["embeddings"]["float"][0] != answer["embeddings"]["float"][1]
    assert client.post(path, json={"texts": ["a"]}, headers=BEARER).status_code == 400  # input_type is required
