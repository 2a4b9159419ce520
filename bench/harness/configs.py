"""What the benchmark routes: the simulator's model profiles, the gateway's routing config, the request bodies.

Two latency profiles, each reachable three ways, so a row "through the gateway" has a "direct" twin:

| profile | direct (simulator) | gateway, concrete | gateway, tier alias -> adaptive virtual model |
|---|---|---|---|
| instant | ``instant`` | ``sim/instant`` | ``bench-instant`` -> ``adaptive-instant`` (``sim/instant``, ``-b``) |
| 50ms | ``slow50`` | ``sim/slow50`` | ``bench-50ms`` -> ``adaptive-50ms`` (``sim/slow50``, ``-b``) |

The alias path adds everything the product does on top of proxying: classification, the session pin, the
adaptive pick over two targets and its health bookkeeping. ``slowstream`` is the model for the slow-stream
test: one chunk a second. ``embed`` (``sim/embed`` through the gateway) is the embedding model of the
embeddings rows: a batch of 16 short texts, 256 numbers a vector, floats.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml

SIM_KEY_VARIABLE = "BENCH_SIM_KEY"
# The simulator again as an Anthropic-kind provider: the Responses rows' translated route.
TRANSLATED_PROVIDER = "sim-anthropic"
EMBED_MODEL = "embed"
EMBED_DIMENSIONS = 256
EMBED_BATCH = 16
CHUNKS = 20  # content chunks per streamed answer
REPLY_TOKENS = 60  # ~240 characters: enough for 20 chunks


@dataclass(frozen=True)
class Profile:
    name: str
    latency_ms: float
    direct_model: str
    concrete_model: str
    alias: str


PROFILES = (
    Profile("instant", 0.0, "instant", "sim/instant", "bench-instant"),
    Profile("50ms", 50.0, "slow50", "sim/slow50", "bench-50ms"),
)
SLOW_STREAM_MODEL = "slowstream"

# Which model name a row sends, by route.
ROUTES = ("direct", "concrete", "alias")
# "relay", "relay-httpx2": the bare ASGI relay (harness/relay_app.py) in the gateway's place, with the
# gateway's HTTP client or with httpx2, sending the direct model name.
RELAY_CLIENTS = {"relay": "http1", "relay-aiohttp": "aiohttp", "relay-httpx2": "httpx2"}
ROUTE_LABELS = {"direct": "direct", "concrete": "gateway", "alias": "gw tier+adaptive", "relay": "bare relay http1",
                "relay-aiohttp": "bare relay aiohttp", "relay-httpx2": "bare relay httpx2",
                # The other gateways of the reference phase (harness/reference_runs.py).
                "tensorzero": "TensorZero (Rust)", "portkey": "Portkey (Node)"}


def model_for(profile: Profile, route: str) -> str:
    if route in RELAY_CLIENTS:
        return profile.direct_model
    return {"direct": profile.direct_model, "concrete": profile.concrete_model, "alias": profile.alias}[route]


def simulator_config(*, slow_stream_chunks: int) -> dict[str, Any]:
    """The simulator's models: two per profile (the adaptive pair) and the slow-stream model."""
    models: dict[str, Any] = {}
    for profile in PROFILES:
        behaviour = {"latency_ms": profile.latency_ms, "chunk_count": CHUNKS, "reply_tokens": REPLY_TOKENS,
                     "input_price": 0.15, "output_price": 0.60}
        models[profile.direct_model] = behaviour
        models[profile.direct_model + "-b"] = behaviour
    models[SLOW_STREAM_MODEL] = {"ttfb_ms": 0, "chunk_count": slow_stream_chunks, "chunk_interval_ms": 1000,
                                 "reply_tokens": slow_stream_chunks * 4}
    models[EMBED_MODEL] = {"dimensions": EMBED_DIMENSIONS, "input_price": 0.02}
    # A small record ring: the simulator keeps the last requests for inspection, which the benchmark never reads.
    return {"seed": 1, "record_limit": 100, "models": models}


def gateway_config(simulator_url: str) -> dict[str, Any]:
    """The routing configuration loaded into the gateway (``manage.py loadconfig``)."""
    models = []
    virtual_models = []
    tier_routes = {}
    for profile in PROFILES:
        for upstream in (profile.direct_model, profile.direct_model + "-b"):
            models.append({"provider": "sim", "upstream": upstream, "input_price": 0.15, "output_price": 0.60,
                           "context_window": 128000, "capabilities": ["text", "tools", "json_schema"]})
        virtual = f"adaptive-{profile.name}"
        targets = [{"model": profile.concrete_model}, {"model": profile.concrete_model + "-b"}]
        virtual_models.append({"source": virtual, "strategy": "adaptive", "targets": targets})
        tier_routes[profile.alias] = {"easy": virtual, "hard": profile.concrete_model + "-b"}
    models.append({"provider": "sim", "upstream": SLOW_STREAM_MODEL, "input_price": 0.15, "output_price": 0.60})
    models.append({"provider": "sim", "upstream": EMBED_MODEL, "input_price": 0.02, "endpoints": ["embeddings"],
                   "dimensions": EMBED_DIMENSIONS, "family": "bench-embedding"})
    models.append({"provider": TRANSLATED_PROVIDER, "upstream": PROFILES[0].direct_model, "input_price": 0.15,
                   "output_price": 0.60, "context_window": 128000, "capabilities": ["text", "tools", "json_schema"]})
    caches = []
    for profile in PROFILES:  # the cache rows (harness/cache.py): the same upstream models under cached names
        for kind in ("cached", "semantic"):
            name = f"{kind}/{profile.direct_model}"
            models.append({"provider": "sim", "upstream": profile.direct_model, "name": name, "input_price": 0.15,
                           "output_price": 0.60, "context_window": 128000, "capabilities": ["text"]})
            cache: dict[str, Any] = {"model": name, "ttl": "1h"}
            if kind == "semantic":
                cache["semantic"] = {"embeddings": f"sim/{EMBED_MODEL}", "threshold": 0.9}
            caches.append(cache)
    return {
        "providers": [{"name": "sim", "kind": "openai", "base_url": f"{simulator_url}/v1",
                       "api_key": "${" + SIM_KEY_VARIABLE + "}"},
                      {"name": TRANSLATED_PROVIDER, "kind": "anthropic", "base_url": simulator_url,
                       "api_key": "${" + SIM_KEY_VARIABLE + "}"}],
        "models": models,
        "virtual_models": virtual_models,
        "tier_routes": tier_routes,
        "caches": caches,
    }


def dump_yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False)


SYSTEM_PROMPT = "You are a helpful assistant for an online shop. Answer politely and concisely."
QUESTION = "Hi, where is my order 48213? It was supposed to arrive on Tuesday."


def chat_body(model: str, *, stream: bool, question: str = QUESTION) -> dict[str, Any]:
    """A typical short chat request (easy tier), in the OpenAI shape."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}],
        "max_tokens": 256,
    }
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def chat_json(model: str, *, stream: bool) -> str:
    return json.dumps(chat_body(model, stream=stream), separators=(",", ":"))


def embeddings_json(model: str) -> str:
    """An embeddings request: a batch of short shop texts, floats back."""
    texts = [f"Order {48213 + i}: where is my parcel? It was supposed to arrive on Tuesday."
             for i in range(EMBED_BATCH)]
    return json.dumps({"model": model, "input": texts, "encoding_format": "float"}, separators=(",", ":"))
