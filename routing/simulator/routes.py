"""Which wire format and action a request path stands for (the path decides, as on the real services).

======================================================  =========  ==================================
path                                                    method     served as
======================================================  =========  ==================================
``/_sim/...``                                           any        control endpoints
``/health``                                             GET        liveness
``/openai/deployments/{deployment}/chat/completions``   POST       Azure OpenAI
``.../chat/completions`` (any prefix)                   POST       OpenAI
``.../responses`` (any prefix)                          POST       OpenAI Responses (``stream`` in body)
``.../messages`` (``/v1/messages``, any prefix)         POST       Anthropic
``.../v2/chat`` (any prefix)                            POST       Cohere Chat v2 (``stream`` in body)
``/{v1beta|v1}/models/{model}:generateContent``         POST       Gemini
``/{v1beta|v1}/models/{model}:streamGenerateContent``   POST       Gemini stream (``alt=sse``: SSE)
``/openai/deployments/{deployment}/embeddings``         POST       Azure OpenAI embeddings (embed)
``.../embeddings`` (any prefix)                         POST       OpenAI embeddings (embed)
``.../messages/count_tokens`` (any prefix)              POST       Anthropic token count (count_tokens)
``/{v1beta|v1}/models/{model}:batchEmbedContents``      POST       Gemini embeddings (embed)
``.../v2/embed`` (any prefix)                           POST       Cohere Embed v2 (cohere_embed)
``.../model/{modelId}/converse``                        POST       Bedrock Converse (``converse-stream``:
                                                                   the AWS event stream)
``.../model/{modelId}/invoke``                          POST       Bedrock embeddings (bedrock_embed)
``.../models``                                          GET        model list: Gemini under v1beta,
                                                                   Anthropic with ``anthropic-version``,
                                                                   else OpenAI
``/{v1beta|v1}/models/{model}``                         GET        one model, the same way (model_calls)
``/v1/projects/{p}/locations/{r}/publishers/google/``   POST       Vertex AI Gemini (``vertex``):
``models/{model}:generateContent|streamGenerateContent``           stream by path, SSE with ``alt=sse``
``.../publishers/google/models/{model}:predict``        POST       Vertex AI embeddings (vertex_embed)
``.../publishers/anthropic/models/{model}:rawPredict``  POST       Vertex AI Claude (``streamRawPredict``:
                                                                   stream); ``count-tokens:rawPredict``:
                                                                   its token count
======================================================  =========  ==================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from routing.simulator.wire.anthropic import AnthropicWire
from routing.simulator.wire.azure import AzureWire
from routing.simulator.wire.base import WireFormat
from routing.simulator.wire.bedrock import BedrockWire
from routing.simulator.wire.cohere import CohereWire
from routing.simulator.wire.gemini import GeminiWire
from routing.simulator.wire.openai import OpenAIWire
from routing.simulator.wire.openai_responses import OpenAIResponsesWire
from routing.simulator.wire.vertex import VertexAnthropicWire, VertexGeminiWire

GENERATE = "generate"
EMBED = "embed"
COUNT_TOKENS = "count_tokens"
MODELS = "models"
MODEL = "model"  # one model's lookup
HEALTH = "health"
CONTROL = "control"
UNKNOWN = "unknown"

OPENAI = OpenAIWire()
OPENAI_RESPONSES = OpenAIResponsesWire()
AZURE = AzureWire()
ANTHROPIC = AnthropicWire()
GEMINI = GeminiWire(sse=True)
GEMINI_ARRAY = GeminiWire(sse=False)
COHERE = CohereWire()
BEDROCK = BedrockWire()
VERTEX = VertexGeminiWire(sse=True)
VERTEX_ARRAY = VertexGeminiWire(sse=False)
VERTEX_ANTHROPIC = VertexAnthropicWire()

# A model id may hold ':' and, as an ARN, '/': the path's last two segments name the operation.
_BEDROCK_PATH = re.compile(r"^(?:/.*)?/model/(.+)/(converse|converse-stream|invoke)$")
_AZURE_PATH = re.compile(r"^/openai/deployments/([^/]+)/chat/completions$")
_AZURE_EMBED_PATH = re.compile(r"^/openai/deployments/([^/]+)/embeddings$")
_GEMINI_EMBED_PATH = re.compile(r"^(?:/[^:]*)?/(?:v1beta|v1|v1alpha)/models/([^/:]+):batchEmbedContents$")
_MODEL_PATH = re.compile(r"^(?:/[^:]*)?/(v1beta|v1|v1alpha)/models/([^/:]+)$")
_VERTEX_PATH = re.compile(
    r"^(?:/[^:]*)?/(?:v1|v1beta1)/projects/[^/]+/locations/[^/]+/publishers/(google|anthropic)/models/([^/:]+):(\w+)$"
)
_GEMINI_PATH = re.compile(
    r"^(?:/[^:]*)?/(?:v1beta|v1|v1alpha)/models/([^/:]+):(generateContent|streamGenerateContent)$"
)


@dataclass(frozen=True, slots=True)
class Route:
    action: str
    wire: WireFormat = OPENAI
    model: str | None = None  # named by the path (Gemini)
    deployment: str | None = None  # Azure
    stream: bool | None = None  # decided by the path (Gemini), else by the body


def match_route(method: str, path: str, *, query: str, anthropic_version: bool) -> Route:
    """The route for a request; ``UNKNOWN`` (answered with OpenAI's "Invalid URL") when none fits."""
    if path.startswith("/_sim/"):
        return Route(CONTROL)
    if method == "GET":
        if path in ("/health", "/healthz"):
            return Route(HEALTH)
        if path.endswith("/models"):
            if "/v1beta/" in path:
                return Route(MODELS, GEMINI)
            return Route(MODELS, ANTHROPIC if anthropic_version else OPENAI)
        one = _MODEL_PATH.match(path)
        if one:
            wire = GEMINI if one.group(1) == "v1beta" else ANTHROPIC if anthropic_version else OPENAI
            return Route(MODEL, wire, model=one.group(2))
        return Route(UNKNOWN)
    if method != "POST":
        return Route(UNKNOWN)
    bedrock = _BEDROCK_PATH.match(path)
    if bedrock:
        operation = bedrock.group(2)
        if operation == "invoke":
            return Route(EMBED, BEDROCK, model=bedrock.group(1))
        return Route(GENERATE, BEDROCK, model=bedrock.group(1), stream=operation == "converse-stream")
    vertex = _VERTEX_PATH.match(path)
    if vertex:
        return _vertex_route(vertex.group(1), vertex.group(2), vertex.group(3), query)
    embed = _embed_route(path)
    if embed is not None:
        return embed
    if path.endswith("/messages/count_tokens"):
        return Route(COUNT_TOKENS, ANTHROPIC)
    azure = _AZURE_PATH.match(path)
    if azure:
        return Route(GENERATE, AZURE, deployment=azure.group(1))
    if path.endswith("/chat/completions"):
        return Route(GENERATE, OPENAI)
    if path.endswith("/responses"):
        return Route(GENERATE, OPENAI_RESPONSES)
    if path.endswith("/messages"):
        return Route(GENERATE, ANTHROPIC)
    if path.endswith("/v2/chat"):
        return Route(GENERATE, COHERE)
    gemini = _GEMINI_PATH.match(path)
    if gemini:
        streaming = gemini.group(2) == "streamGenerateContent"
        wire = GEMINI if "alt=sse" in query or not streaming else GEMINI_ARRAY
        return Route(GENERATE, wire, model=gemini.group(1), stream=streaming)
    return Route(UNKNOWN)


def _embed_route(path: str) -> Route | None:
    azure = _AZURE_EMBED_PATH.match(path)
    if azure:
        return Route(EMBED, AZURE, deployment=azure.group(1))
    gemini = _GEMINI_EMBED_PATH.match(path)
    if gemini:
        return Route(EMBED, GEMINI, model=gemini.group(1))
    if path.endswith("/embeddings"):
        return Route(EMBED, OPENAI)
    if path.endswith("/v2/embed"):
        return Route(EMBED, COHERE)
    return None


def _vertex_route(publisher: str, model: str, method: str, query: str) -> Route:
    if publisher == "google":
        if method == "predict":
            return Route(EMBED, VERTEX, model=model)
        if method in ("generateContent", "streamGenerateContent"):
            streaming = method == "streamGenerateContent"
            wire = VERTEX if "alt=sse" in query or not streaming else VERTEX_ARRAY
            return Route(GENERATE, wire, model=model, stream=streaming)
        return Route(UNKNOWN)
    if method == "rawPredict" and model == "count-tokens":
        return Route(COUNT_TOKENS, VERTEX_ANTHROPIC)
    if method in ("rawPredict", "streamRawPredict"):
        return Route(GENERATE, VERTEX_ANTHROPIC, model=model, stream=method == "streamRawPredict")
    return Route(UNKNOWN)
