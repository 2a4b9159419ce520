"""Vertex AI adapters: URLs, bodies and headers for Gemini and Claude (chat, stream, tools), what differs from the
Gemini API and Anthropic in answers and streams (nothing but the envelope), errors, embeddings and count_tokens."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from routing.core.embeddings import EmbeddingsRequest
from routing.core.error_classifier import classify_http_error
from routing.core.outcome import ErrorClass
from routing.core.table import ModelSpec, ProviderSpec
from routing.providers import CapabilityError, MalformedResponse, get_adapter
from routing.providers.anthropic.count_tokens import build_count_tokens_request
from routing.providers.embeddings import build_embeddings_request, parse_embeddings_response, serves_embeddings
from routing.providers.probes import completion_request, models_request
from tests.providers.support import PROVIDERS, sse

HOST = "https://us-central1-aiplatform.googleapis.com"
VERTEX = ProviderSpec(name="vx", kind="vertex", base_url=HOST, region="us-central1", project="my-project-1")
VERTEX_CLAUDE = ProviderSpec(name="vc", kind="vertex_anthropic", base_url=HOST + "/v1/", region="us-central1",
                             project="my-project-1")
GLOBAL_CLAUDE = ProviderSpec(name="vg", kind="vertex_anthropic", base_url="https://aiplatform.googleapis.com",
                             region="global", project="my-project-1")
GEMINI = ModelSpec(name="vx/gemini", provider="vx", upstream="gemini-2.5-flash",
                   capabilities=frozenset({"text", "tools", "image"}))
CLAUDE = ModelSpec(name="vc/claude", provider="vc", upstream="claude-sonnet-4-5@20250929",
                   capabilities=frozenset({"text", "tools", "image"}), max_output_tokens=4096)
PREFIX = f"{HOST}/v1/projects/my-project-1/locations/us-central1/publishers"
TOKEN = "ya29.a-test-access-token"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
OPENAI_BODY: dict[str, Any] = {"model": "pub", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS}
ANTHROPIC_BODY: dict[str, Any] = {
    "model": "pub", "max_tokens": 100, "system": [{"type": "text", "text": "Be brief.",
                                                   "cache_control": {"type": "ephemeral"}}],
    "messages": [{"role": "user", "content": "hi"}],
    "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}], "metadata": {"user_id": "u1"},
}


def build(provider: ProviderSpec, model: ModelSpec, body: dict[str, Any], *, inbound: str = "openai",
          stream: bool = False, client_headers: dict[str, str] | None = None) -> Any:
    return get_adapter(provider.kind).build_request(provider=provider, model=model, body=body,
                                                    inbound=inbound, stream=stream, api_key=TOKEN,  # type: ignore[arg-type]
                                                    client_headers=client_headers)


@pytest.mark.parametrize(("stream", "method"), [(False, "generateContent"),
                                                 (True, "streamGenerateContent?alt=sse")])
def test_it_sends_gemini_to_the_publisher_path_with_the_bearer_token(stream: bool, method: str) -> None:
    request = build(VERTEX, GEMINI, OPENAI_BODY, stream=stream)

    assert request.url == f"{PREFIX}/google/models/gemini-2.5-flash:{method}"
    assert request.headers == {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    assert TOKEN not in repr(request)


@pytest.mark.parametrize("inbound", ["openai", "anthropic"])
def test_the_gemini_body_is_the_gemini_api_s(inbound: str) -> None:
    body = OPENAI_BODY if inbound == "openai" else ANTHROPIC_BODY
    gemini_provider = PROVIDERS["gemini"]
    gemini_model = ModelSpec(name="ge/x", provider=gemini_provider.name, upstream=GEMINI.upstream,
                             capabilities=GEMINI.capabilities)

    vertex = build(VERTEX, GEMINI, body, inbound=inbound).json
    gemini = build(gemini_provider, gemini_model, body, inbound=inbound).json

    assert vertex == gemini
    assert vertex["tools"][0]["functionDeclarations"][0]["name"] == "get_weather"


def test_a_global_provider_uses_the_global_host() -> None:
    request = build(GLOBAL_CLAUDE, CLAUDE, OPENAI_BODY)

    assert request.url == ("https://aiplatform.googleapis.com/v1/projects/my-project-1/locations/global/publishers/"
                           "anthropic/models/claude-sonnet-4-5@20250929:rawPredict")


@pytest.mark.parametrize(("stream", "method"), [(False, "rawPredict"), (True, "streamRawPredict")])
def test_claude_goes_to_raw_predict_without_model_and_with_the_vertex_version(stream: bool, method: str) -> None:
    request = build(VERTEX_CLAUDE, CLAUDE, ANTHROPIC_BODY, inbound="anthropic", stream=stream)

    assert request.url == f"{PREFIX}/anthropic/models/claude-sonnet-4-5@20250929:{method}"
    assert request.headers == {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    expected = {k: v for k, v in ANTHROPIC_BODY.items() if k != "model"}
    expected["anthropic_version"] = "vertex-2023-10-16"
    if stream:
        expected["stream"] = True
    assert request.json == expected  # the Anthropic body as the client sent it: a pass-through


def test_an_openai_client_s_body_is_translated_as_for_anthropic() -> None:
    anthropic_model = ModelSpec(name="an/x", provider="an", upstream=CLAUDE.upstream, capabilities=CLAUDE.capabilities,
                                max_output_tokens=4096)
    direct = build(PROVIDERS["anthropic"], anthropic_model, OPENAI_BODY, stream=True).json

    request = build(VERTEX_CLAUDE, CLAUDE, OPENAI_BODY, stream=True).json

    assert "model" not in request
    assert request == {**{k: v for k, v in direct.items() if k != "model"}, "anthropic_version": "vertex-2023-10-16"}
    assert request["tools"][0]["name"] == "get_weather"


def test_anthropic_beta_is_forwarded_for_an_anthropic_client_only() -> None:
    beta = {"Anthropic-Beta": "context-1m-2025-08-07"}

    allowing = dataclasses.replace(VERTEX_CLAUDE, allowed_betas=frozenset({"context-1m-2025-08-07"}))
    anthropic = build(allowing, CLAUDE, ANTHROPIC_BODY, inbound="anthropic", client_headers=beta)
    openai = build(allowing, CLAUDE, OPENAI_BODY, client_headers=beta)

    assert anthropic.headers["anthropic-beta"] == "context-1m-2025-08-07"
    assert "anthropic-beta" not in openai.headers


def test_answers_and_streams_are_read_as_the_gemini_api_s_and_anthropic_s() -> None:
    gemini_answer = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hello"}]},
                                     "finishReason": "STOP"}],
                     "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2, "totalTokenCount": 7}}
    claude_answer = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                     "content": [{"type": "text", "text": "Hi"}], "stop_reason": "end_turn", "stop_sequence": None,
                     "usage": {"input_tokens": 4, "output_tokens": 1}}

    gemini = get_adapter("vertex").parse_response(status=200, data=json.dumps(gemini_answer).encode(),
                                                  inbound="openai", public_model="vx/gemini", created=1)
    claude = get_adapter("vertex_anthropic").parse_response(status=200, data=json.dumps(claude_answer).encode(),
                                                            inbound="anthropic", public_model="vc/claude", created=1)
    translated = get_adapter("vertex_anthropic").parse_response(
        status=200, data=json.dumps(claude_answer).encode(), inbound="openai", public_model="vc/claude", created=1)

    assert gemini.client_body["choices"][0]["message"]["content"] == "Hello"
    assert (gemini.usage.input_tokens, gemini.usage.output_tokens) == (5, 2)
    assert claude.client_body == {**claude_answer, "model": "vc/claude"}
    assert translated.client_body["choices"][0]["message"]["content"] == "Hi"

    stream = get_adapter("vertex").stream_translator(inbound="anthropic", public_model="vx/gemini",
                                                     client_wants_usage=True, created=1)
    frames = stream.feed(sse(gemini_answer)) + stream.finish()
    assert stream.complete
    assert b"message_stop" in b"".join(frames)


@pytest.mark.parametrize(("status", "body", "error_class", "reason"), [
    (429, {"error": {"code": 429, "message": "Quota exceeded for aiplatform.googleapis.com/generate_content_requests"
                                            "_per_minute_per_project_per_base_model with base model: gemini-2.5-flash",
                     "status": "RESOURCE_EXHAUSTED"}}, ErrorClass.TRANSIENT, "rate_limited"),
    (401, {"error": {"code": 401, "message": "Request had invalid authentication credentials.",
                     "status": "UNAUTHENTICATED"}}, ErrorClass.INCOMPATIBLE, "auth"),
    (403, [{"error": {"code": 403, "message": "Permission 'aiplatform.endpoints.predict' denied",
                      "status": "PERMISSION_DENIED"}}], ErrorClass.INCOMPATIBLE, "auth"),
    (404, {"error": {"code": 404, "message": "Publisher Model `publishers/google/models/x` was not found",
                     "status": "NOT_FOUND"}}, ErrorClass.INCOMPATIBLE, "not_found"),
    (400, {"error": {"code": 400, "message": "The input token count (1048577) exceeds the maximum number of tokens "
                                            "allowed (1048576).", "status": "INVALID_ARGUMENT"}},
     ErrorClass.INCOMPATIBLE, "context_overflow"),
    (400, {"type": "error", "error": {"type": "invalid_request_error",
                                      "message": "prompt is too long: 210000 tokens > 200000 maximum"}},
     ErrorClass.INCOMPATIBLE, "context_overflow"),
    (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
     ErrorClass.TRANSIENT, "overloaded"),
])
@pytest.mark.parametrize("kind", ["vertex", "vertex_anthropic"])
def test_vertex_errors_are_classified_in_both_shapes(kind: str, status: int, body: Any, error_class: ErrorClass,
                                                     reason: str) -> None:
    data = json.dumps(body).encode()

    outcome = classify_http_error(status, {}, data, kind)
    error = get_adapter(kind).parse_error(status=status, data=data)

    assert (outcome.error_class, outcome.reason) == (error_class, reason)
    inner = body[0]["error"] if isinstance(body, list) else body["error"]
    assert error.message == inner["message"]
    assert error.is_context_overflow == (reason == "context_overflow")


def test_embeddings_go_to_predict_and_read_vectors_and_token_counts() -> None:
    embedder = ModelSpec(name="vx/emb", provider="vx", upstream="text-embedding-005",
                         endpoints=frozenset({"embeddings"}), dimensions=768)
    request = EmbeddingsRequest(model="vx/emb", inputs=("first", "second text"), dimensions=4,
                                encoding_format="float")

    built = build_embeddings_request(VERTEX, embedder, request, TOKEN)
    answer = {"predictions": [{"embeddings": {"values": [0.1, 0.2, 0.3, 0.4],
                                              "statistics": {"token_count": 2.0, "truncated": False}}},
                              {"embeddings": {"values": [0.5, 0.6, 0.7, 0.8],
                                              "statistics": {"token_count": 3, "truncated": False}}}],
              "metadata": {"billableCharacterCount": 16}}
    parsed = parse_embeddings_response("vertex", json.dumps(answer).encode(), request, "vx/emb", dimensions=4)

    assert serves_embeddings("vertex")
    assert not serves_embeddings("vertex_anthropic")
    assert built.url == f"{PREFIX}/google/models/text-embedding-005:predict"
    assert built.headers["Authorization"] == f"Bearer {TOKEN}"
    assert built.json == {"instances": [{"content": "first"}, {"content": "second text"}],
                          "parameters": {"outputDimensionality": 4}}
    assert [d["embedding"] for d in parsed.client_body["data"]] == [[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8]]
    assert parsed.usage.input_tokens == 5
    assert not parsed.usage_estimated


def test_embeddings_without_counts_are_estimated_and_token_ids_refused() -> None:
    embedder = ModelSpec(name="vx/emb", provider="vx", upstream="text-embedding-005",
                         endpoints=frozenset({"embeddings"}))
    request = EmbeddingsRequest(model="vx/emb", inputs=("first",))
    answer = {"predictions": [{"embeddings": {"values": [0.1, 0.2]}}]}

    parsed = parse_embeddings_response("vertex", json.dumps(answer).encode(), request, "vx/emb")

    assert parsed.usage_estimated
    assert "parameters" not in build_embeddings_request(VERTEX, embedder, request, TOKEN).json
    with pytest.raises(CapabilityError) as refused:
        build_embeddings_request(VERTEX, embedder, EmbeddingsRequest(model="vx/emb", inputs=((1, 2, 3),)), TOKEN)
    assert refused.value.param == "input"
    with pytest.raises(MalformedResponse):
        parse_embeddings_response("vertex", b'{"predictions": [{"embeddings": {"values": "x"}}]}', request, "vx/emb")


def test_count_tokens_goes_to_vertex_s_count_tokens_raw_predict() -> None:
    body = {"model": "pub", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}], "stream": True}

    allowing = dataclasses.replace(VERTEX_CLAUDE, allowed_betas=frozenset({"b1"}))
    built = build_count_tokens_request(allowing, CLAUDE, body, TOKEN, {"anthropic-beta": "b1"})

    assert built.url == f"{PREFIX}/anthropic/models/count-tokens:rawPredict"
    assert built.json == {"model": "claude-sonnet-4-5@20250929", "messages": body["messages"],
                          "anthropic_version": "vertex-2023-10-16"}
    assert built.headers == {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json",
                             "anthropic-beta": "b1"}


@pytest.mark.parametrize(("provider", "model", "path"), [
    (VERTEX, GEMINI, "/google/models/gemini-2.5-flash:generateContent"),
    (VERTEX_CLAUDE, CLAUDE, "/anthropic/models/claude-sonnet-4-5@20250929:rawPredict"),
])
def test_probes_are_one_token_completions(provider: ProviderSpec, model: ModelSpec, path: str) -> None:
    probe = completion_request(provider, model, TOKEN)

    assert models_request(provider, model, TOKEN) is None
    assert probe.url == PREFIX + path
    assert probe.headers["Authorization"] == f"Bearer {TOKEN}"
