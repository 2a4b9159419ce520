"""The background prober's calls, per wire format (pure: builds requests and reads answers; no I/O).

``models``: the call that proves the key and the model for free.

==============  ==========================================================  ====================================
kind            request                                                     passes when
==============  ==========================================================  ====================================
openai          ``GET {base_url}/models``                                   2xx and ``data[].id`` names the model
presets         the same as openai (mistral, groq, ... lmstudio)            the same
anthropic       ``GET {base_url}/v1/models/{model}``                        2xx with the model's ``id``
gemini          ``GET {base_url}/v1beta/models/{model}`` (models.get)       2xx with the model's ``name``
azure_openai    none: its listing names base models, not deployments        (``completion`` instead)
cohere          none                                                        (``completion`` instead)
vertex,         none: a one-token completion proves what a lookup cannot    (``completion`` instead)
vertex_anth...  (the token's project, region and model access together)
bedrock         none: the model list is another service                     (``completion`` instead: a one-token
                (``bedrock.{region}``) with its own permission, and it      Converse call, signed like a
                proves neither the model nor the runtime endpoint           client's request)
==============  ==========================================================  ====================================

``completion``: a one-token chat completion through the format's own adapter (so it is built exactly as a
client's request would be), passing on any 2xx answer that parses, whatever it says.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from routing.core.table import ModelSpec, ProviderSpec
from routing.providers import get_adapter
from routing.providers.base import ProviderRequest, join_url, load_json_body
from routing.providers.errors import MalformedResponse
from routing.providers.openai.presets import PRESETS

PROBE_PROMPT = "ping"


def models_request(provider: ProviderSpec, model: ModelSpec, api_key: str) -> ProviderRequest | None:
    """The models call for ``model`` (GET, no body); None when the format has none that proves it."""
    headers = get_adapter(provider.kind).headers(api_key)
    headers.pop("Content-Type", None)  # a GET carries no body
    name = quote(model.upstream, safe="")
    if provider.kind == "openai" or provider.kind in PRESETS:
        preset = PRESETS.get(provider.kind)
        base_url = provider.base_url or (preset.base_url if preset is not None else "")
        return ProviderRequest("GET", join_url(base_url, "/models"), headers, {})
    if provider.kind == "anthropic":
        return ProviderRequest("GET", join_url(provider.base_url, f"/models/{name}", version="/v1"), headers, {})
    if provider.kind == "gemini":
        name = quote(model.upstream.removeprefix("models/"), safe="")
        return ProviderRequest("GET", join_url(provider.base_url, f"/models/{name}", version="/v1beta"), headers,
                               {})
    return None


def models_answer_proves(kind: str, data: bytes, model: ModelSpec) -> bool:
    """Whether a models call's 2xx body proves ``model``: listed (OpenAI), or described (Anthropic, Gemini).

    Raises MalformedResponse when the body is not the JSON the format answers.
    """
    body: Any = load_json_body(data)
    if not isinstance(body, dict):
        raise MalformedResponse("the models answer is not a JSON object")
    if kind == "openai" or kind in PRESETS:
        listed = body.get("data")
        if not isinstance(listed, list):
            raise MalformedResponse("the models list has no data array")
        return any(isinstance(entry, dict) and entry.get("id") == model.upstream for entry in listed)
    if kind == "anthropic":
        return isinstance(body.get("id"), str)
    if kind == "gemini":
        return isinstance(body.get("name"), str)
    return False


def completion_body(provider: ProviderSpec, model: ModelSpec) -> dict[str, Any]:
    """A one-token chat completion in the OpenAI shape (every adapter translates it to its own format).

    OpenAI's reasoning models refuse ``max_tokens`` and take ``max_completion_tokens``; other OpenAI-compatible
    servers may not know the latter, so it is sent only to a model configured with ``reasoning``.
    """
    limit = "max_completion_tokens" if (provider.kind in ("openai", "azure_openai")
                                        and "reasoning" in model.capabilities) else "max_tokens"
    return {"model": model.upstream, "messages": [{"role": "user", "content": PROBE_PROMPT}], limit: 1}


def completion_request(provider: ProviderSpec, model: ModelSpec, api_key: str) -> ProviderRequest:
    """The one-token completion as the format's adapter builds it."""
    return get_adapter(provider.kind).build_request(
        provider=provider, model=model, body=completion_body(provider, model), inbound="openai", stream=False,
        api_key=api_key,
    )
