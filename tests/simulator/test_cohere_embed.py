"""The simulator's Cohere Embed v2 (``POST /v2/embed``): deterministic vectors shared with the other formats,
Cohere's checks and error body, and the chat faults."""

from __future__ import annotations

import base64
import struct
from typing import Any

import httpx2 as httpx
import pytest

from routing.simulator import SimulatorServer
from routing.simulator.wire.embeddings import embedding_vector

HEADERS = {"Authorization": "Bearer co-test-key"}


def embed_body(**extra: Any) -> dict[str, Any]:
    return {"model": "gpt-test", "texts": ["alpha", "beta"], "input_type": "search_document", **extra}


def test_it_answers_embeddings_by_type_with_the_shared_vectors(client: httpx.Client) -> None:
    answer = client.post("/v2/embed", json=embed_body(embedding_types=["float"]), headers=HEADERS).json()

    assert answer["response_type"] == "embeddings_by_type"
    assert answer["texts"] == ["alpha", "beta"]
    assert answer["embeddings"]["float"] == [embedding_vector("gpt-test", "alpha", 8),
                                             embedding_vector("gpt-test", "beta", 8)]
    assert answer["meta"] == {"api_version": {"version": "2"}, "billed_units": {"input_tokens": 3}}
    assert len(answer["id"]) == 36


def test_it_answers_float_when_no_type_is_asked_and_every_asked_type(client: httpx.Client) -> None:
    plain = client.post("/v2/embed", json=embed_body(output_dimension=4), headers=HEADERS).json()
    typed = client.post("/v2/embed", json=embed_body(embedding_types=["int8", "base64"], output_dimension=4),
                        headers=HEADERS).json()

    vector = embedding_vector("gpt-test", "alpha", 4)
    assert list(plain["embeddings"]) == ["float"]
    assert plain["embeddings"]["float"][0] == vector
    assert typed["embeddings"]["int8"][0] == [round(v * 127) for v in vector]
    packed = base64.b64decode(typed["embeddings"]["base64"][0])
    assert struct.unpack("<4f", packed) == pytest.approx(vector, abs=1e-6)


@pytest.mark.parametrize(("body", "param"), [
    ({"model": "gpt-test", "input_type": "search_query"}, "texts"),
    (embed_body(input_type=None), "input_type"),
    (embed_body(input_type="search"), "input_type"),
    (embed_body(texts=["x"] * 97), "texts"),
    (embed_body(embedding_types=["binary"]), "embedding_types"),
    (embed_body(output_dimension=0), "output_dimension"),
    (embed_body(truncate="MIDDLE"), "truncate"),
])
def test_it_refuses_a_bad_body_in_cohere_s_error_shape(sim: SimulatorServer, client: httpx.Client,
                                                       body: dict[str, Any], param: str) -> None:
    response = client.post("/v2/embed", json=body, headers=HEADERS)

    assert response.status_code == 400
    assert set(response.json()) == {"id", "message"}
    assert response.json()["message"].startswith("invalid request: ")
    assert param in response.json()["message"]


def test_it_needs_a_key(client: httpx.Client) -> None:
    response = client.post("/v2/embed", json=embed_body())

    assert response.status_code == 401
    assert response.json()["message"] == "no api key supplied"


def test_a_rate_limit_fault_is_cohere_s_429(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("gpt-test", {"kind": "rate_limit", "retry_after": 2, "times": 1})

    limited = client.post("/v2/embed", json=embed_body(), headers=HEADERS)
    after = client.post("/v2/embed", json=embed_body(), headers=HEADERS)

    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "2"
    assert "Trial key" in limited.json()["message"]
    assert after.status_code == 200


def test_malformed_json_and_a_cut_body_break_the_answer(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("gpt-test", [{"kind": "malformed_json", "times": 1}, {"kind": "stream_cut", "times": 1}])

    broken = client.post("/v2/embed", json=embed_body(), headers=HEADERS)
    with pytest.raises(ValueError):
        broken.json()
    with pytest.raises(httpx.RemoteProtocolError):
        client.post("/v2/embed", json=embed_body(), headers=HEADERS)


def test_it_records_the_request_as_a_cohere_embeddings_call(sim: SimulatorServer, client: httpx.Client) -> None:
    client.post("/v2/embed", json=embed_body(), headers=HEADERS)
    sim.wait_until_idle()

    [record] = sim.received("gpt-test")
    assert record["wire"] == "cohere"
    assert record["endpoint"] == "embeddings"
    assert record["usage"]["input_tokens"] == 3
