"""Cohere Embed v2: the OpenAI embeddings request translated to ``/v2/embed`` and the answer back, what Cohere
cannot take refused before sending, malformed answers refused, and Cohere's errors classified."""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import pytest

from routing.core.embeddings import EmbeddingsRequestError, parse_embeddings_request
from routing.core.error_classifier import classify_http_error
from routing.core.outcome import ErrorClass
from routing.core.table import ModelSpec, ProviderSpec
from routing.providers import CapabilityError, MalformedResponse
from routing.providers.embeddings import build_embeddings_request, parse_embeddings_response, serves_embeddings

COHERE = ProviderSpec("co", "cohere", "https://api.cohere.com")
MODEL = ModelSpec(name="co/embed", provider="co", upstream="embed-v4.0", endpoints=frozenset({"embeddings"}),
                  dimensions=1536, family="cohere-embed-v4")
KEY = "co-secret-key"


def request(**body: Any) -> Any:
    return parse_embeddings_request({"model": "co/embed", **body})


def cohere_answer(*vectors: list[float], tokens: Any = 5) -> bytes:
    meta: dict[str, Any] = {"api_version": {"version": "2"}}
    if tokens is not None:
        meta["billed_units"] = {"input_tokens": tokens}
    return json.dumps({"id": "5807ee2e", "embeddings": {"float": list(vectors)}, "texts": ["a"] * len(vectors),
                       "meta": meta, "response_type": "embeddings_by_type"}).encode()


def test_the_request_goes_to_v2_embed_with_search_document_by_default() -> None:
    built = build_embeddings_request(COHERE, MODEL, request(input=["a", "b"]), KEY)

    assert serves_embeddings("cohere")
    assert built.url == "https://api.cohere.com/v2/embed"
    assert built.headers == {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    assert built.json == {"model": "embed-v4.0", "texts": ["a", "b"], "input_type": "search_document",
                          "embedding_types": ["float"]}
    assert KEY not in repr(built)


def test_the_client_chooses_input_type_and_dimensions_become_output_dimension() -> None:
    provider = ProviderSpec("co", "cohere", "https://api.cohere.com/v2/")
    built = build_embeddings_request(provider, MODEL, request(input="q", input_type="search_query", dimensions=512,
                                                              encoding_format="base64", user="u1"), KEY)

    assert built.url == "https://api.cohere.com/v2/embed"
    assert built.json == {"model": "embed-v4.0", "texts": ["q"], "input_type": "search_query",
                          "embedding_types": ["float"], "output_dimension": 512}


@pytest.mark.parametrize(("body", "param"), [
    ({"input": [1, 2, 3]}, "input"),
    ({"input": ["a", [1, 2]]}, "input[1]"),
    ({"input": ["t"] * 97}, "input"),
    ({"input": "a", "input_type": "search"}, "input_type"),
    ({"input": "a", "dimensions": 2048}, "dimensions"),
])
def test_what_cohere_cannot_take_is_refused_before_sending(body: dict[str, Any], param: str) -> None:
    with pytest.raises(CapabilityError) as refused:
        build_embeddings_request(COHERE, MODEL, request(**body), KEY)

    assert refused.value.param == param


def test_a_non_string_input_type_is_the_client_s_mistake() -> None:
    with pytest.raises(EmbeddingsRequestError) as refused:
        request(input="a", input_type=3)

    assert refused.value.param == "input_type"


def test_the_answer_becomes_openai_s_shape_with_cohere_s_billed_tokens() -> None:
    parsed = parse_embeddings_response("cohere", cohere_answer([0.1, 0.2], [0.3, 0.4], tokens=7),
                                       request(input=["a", "b"]), "co/embed", dimensions=2)

    assert parsed.client_body == {
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]},
                 {"object": "embedding", "index": 1, "embedding": [0.3, 0.4]}],
        "model": "co/embed",
        "usage": {"prompt_tokens": 7, "total_tokens": 7},
    }
    assert parsed.usage.input_tokens == 7
    assert not parsed.usage_estimated


def test_base64_is_packed_by_the_gateway_and_a_missing_count_is_estimated() -> None:
    parsed = parse_embeddings_response("cohere", cohere_answer([0.5, -0.5], tokens=None),
                                       request(input="hello world", encoding_format="base64"), "co/embed")

    packed = base64.b64decode(parsed.client_body["data"][0]["embedding"])
    assert struct.unpack("<2f", packed) == pytest.approx((0.5, -0.5))
    assert parsed.usage_estimated
    assert parsed.usage.input_tokens == 3  # "hello world": 11 characters, about four a token


@pytest.mark.parametrize("data", [
    b'{"embeddings": {"int8": [[1, 2]]}}',
    b'{"embeddings": {"float": [[0.1, 0.2], [0.3, 0.4]]}}',
    b'{"embeddings": {"float": [["x", 0.2]]}}',
    b'{"embeddings": {"float": [[NaN, 0.2]]}}',
    b'{"embeddings": {"float": [[0.1, 0.2]',
    b"[]",
])
def test_a_malformed_answer_is_refused(data: bytes) -> None:
    with pytest.raises(MalformedResponse):
        parse_embeddings_response("cohere", data, request(input="a"), "co/embed")


def test_a_vector_of_another_size_than_asked_is_refused() -> None:
    with pytest.raises(MalformedResponse):
        parse_embeddings_response("cohere", cohere_answer([0.1, 0.2, 0.3]), request(input="a"), "co/embed",
                                  dimensions=2)


@pytest.mark.parametrize(("status", "body", "headers", "verdict"), [
    (429, {"id": "x", "message": "You are using a Trial key, which is limited to 20 API calls / minute."},
     {"retry-after": "2"}, (ErrorClass.TRANSIENT, "rate_limited")),
    (500, {"id": "x", "message": "internal server error, this has been reported to our developers"}, {},
     (ErrorClass.TRANSIENT, "server_error")),
    (400, {"id": "x", "message": "invalid request: valid input_type must be provided with the provided model"}, {},
     (ErrorClass.PERMANENT, "bad_request")),
])
def test_cohere_s_errors_are_classified(status: int, body: dict[str, Any], headers: dict[str, str],
                                        verdict: tuple[ErrorClass, str]) -> None:
    outcome = classify_http_error(status, headers, json.dumps(body).encode(), "cohere", latency_s=0.1, now_unix=0.0)

    assert (outcome.error_class, outcome.reason) == verdict
