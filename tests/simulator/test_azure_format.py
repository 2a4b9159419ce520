"""Azure OpenAI: deployment paths, api-key and api-version, content-filter envelope, the openai SDK's Azure client."""

from __future__ import annotations

import httpx2 as httpx
import openai

from routing.simulator import SimulatorServer
from tests.simulator.wire_helpers import AZURE_HEADERS, AZURE_PATH, openai_body, openai_stream_text, sse_json

PATH = AZURE_PATH.format(deployment="prod-gpt")


def chat(text: str = "Hello there", **extra: object) -> dict[str, object]:
    body = openai_body(text, **extra)
    del body["model"]  # Azure names the model by the deployment in the path
    return body


def test_it_answers_as_the_deployment_with_content_filter_results(client: httpx.Client) -> None:
    answer = client.post(PATH, json=chat(), headers=AZURE_HEADERS).json()

    assert answer["model"] == "prod-gpt"
    assert answer["choices"][0]["message"]["content"] == "Simulated answer 1 from prod-gpt: Hello there"
    assert answer["choices"][0]["content_filter_results"]["hate"] == {"filtered": False, "severity": "safe"}
    assert answer["prompt_filter_results"][0]["prompt_index"] == 0
    assert answer["usage"]["prompt_tokens"] > 0


def test_it_opens_a_stream_with_the_prompt_filter_chunk(client: httpx.Client) -> None:
    response = client.post(PATH, json=chat(stream=True, stream_options={"include_usage": True}), headers=AZURE_HEADERS)
    chunks = sse_json(response.text)

    assert chunks[0]["choices"] == []
    assert chunks[0]["id"] == ""
    assert "prompt_filter_results" in chunks[0]
    assert openai_stream_text(chunks[1:]) == "Simulated answer 1 from prod-gpt: Hello there"
    assert chunks[-1]["usage"]["total_tokens"] > 0


def test_it_requires_the_api_key_header(client: httpx.Client) -> None:
    response = client.post(PATH, json=chat())

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "401"
    assert "Access denied" in response.json()["error"]["message"]


def test_it_requires_an_api_version(client: httpx.Client) -> None:
    response = client.post("/openai/deployments/prod-gpt/chat/completions", json=chat(), headers=AZURE_HEADERS)

    assert response.status_code == 404
    assert response.json() == {"error": {"code": "404", "message": "Resource not found"}}


def test_it_says_deployment_not_found_for_an_unknown_deployment_when_strict() -> None:
    with SimulatorServer({"strict_models": True, "models": {"known": {}}}) as sim, httpx.Client() as http:
        response = http.post(sim.base_url + PATH, json=chat(), headers=AZURE_HEADERS)

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "DeploymentNotFound"


def test_it_keys_faults_by_deployment(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("prod-gpt", {"kind": "rate_limit", "retry_after": 6, "times": 1})

    limited = client.post(PATH, json=chat(), headers=AZURE_HEADERS)
    other = client.post(AZURE_PATH.format(deployment="other"), json=chat(), headers=AZURE_HEADERS)
    recovered = client.post(PATH, json=chat(), headers=AZURE_HEADERS)

    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "6"
    assert limited.json()["error"]["code"] == "429"
    assert "Please retry after 6 seconds" in limited.json()["error"]["message"]
    assert other.status_code == 200
    assert recovered.status_code == 200


def test_the_openai_sdks_azure_client_reads_a_completion_and_a_stream(sim: SimulatorServer) -> None:
    azure = openai.AzureOpenAI(azure_endpoint=sim.base_url, api_key="azure-key", api_version="2024-10-21",
                               max_retries=0)

    completion = azure.chat.completions.create(model="prod-gpt", messages=[{"role": "user", "content": "Hi"}])
    stream = azure.chat.completions.create(model="prod-gpt", messages=[{"role": "user", "content": "Hi"}],
                                           stream=True)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)

    assert completion.choices[0].message.content == "Simulated answer 1 from prod-gpt: Hi"
    assert text == "Simulated answer 2 from prod-gpt: Hi"
    assert sim.received("prod-gpt")[0]["auth"]["header"] == "api-key"
