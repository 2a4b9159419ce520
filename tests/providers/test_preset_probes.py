"""Background probes for the new kinds: a preset is proved by its free models listing, Cohere by a one-token
completion built by its own adapter."""

from __future__ import annotations

import json

from routing.core.probes import mode_problem, probe_mode
from routing.core.table import CAPABILITIES, ModelSpec, ProviderSpec
from routing.providers.probes import completion_request, models_answer_proves, models_request

MODEL = ModelSpec(name="pub", provider="p", upstream="llama-3.3-70b", capabilities=frozenset(CAPABILITIES))


def test_a_preset_is_probed_by_its_models_listing_and_cohere_by_a_completion() -> None:
    assert probe_mode("groq", "") == "models"
    assert probe_mode("lmstudio", "") == "models"
    assert probe_mode("cohere", "") == "completion"
    assert mode_problem("vllm", "models") is None
    assert mode_problem("cohere", "models") is not None


def test_a_keyless_local_preset_lists_its_models_without_a_key_header() -> None:
    request = models_request(ProviderSpec(name="p", kind="ollama", base_url=""), MODEL, "")

    assert request is not None
    assert (request.method, request.url) == ("GET", "http://localhost:11434/v1/models")
    assert "Authorization" not in request.headers


def test_a_hosted_preset_lists_its_models_with_its_key_and_the_listing_proves_the_model() -> None:
    request = models_request(ProviderSpec(name="p", kind="groq", base_url="https://api.groq.com/openai/v1"),
                             MODEL, "gsk-key")
    listing = json.dumps({"object": "list", "data": [{"id": "llama-3.3-70b", "object": "model"}]}).encode()

    assert request is not None
    assert request.url == "https://api.groq.com/openai/v1/models"
    assert request.headers["Authorization"] == "Bearer gsk-key"
    assert models_answer_proves("groq", listing, MODEL)
    assert not models_answer_proves("groq", b'{"data": []}', MODEL)


def test_cohere_has_no_models_probe_and_its_completion_probe_is_a_one_token_chat() -> None:
    provider = ProviderSpec(name="co", kind="cohere", base_url="https://api.cohere.com")

    assert models_request(provider, MODEL, "co-key") is None
    request = completion_request(provider, MODEL, "co-key")
    assert request.url == "https://api.cohere.com/v2/chat"
    assert request.json["max_tokens"] == 1
    assert request.json["stream"] is False
