"""OpenAI-compatible preset kinds: base URLs, key headers, forwarded headers, and one test per quirk rule."""

from __future__ import annotations

from typing import Any

import pytest

from routing.core.table import CAPABILITIES, ModelSpec, ProviderSpec
from routing.providers import CapabilityError, get_adapter
from routing.providers.openai.presets import DROP, DROP_MESSAGE_FIELD, PRESETS, REFUSE, RENAME

BASE = {"model": "pub", "messages": [{"role": "user", "content": "Hi", "name": "ann"}]}

# (kind, upstream model, the client's extra fields, the rule's param) -> what reaches the host.
# Every rule in PRESETS has a case here (test_every_rule_has_a_case checks it).
DROPPED_OR_RENAMED: list[tuple[str, str, dict[str, Any], str, dict[str, Any]]] = [
    ("mistral", "mistral-large-latest", {"max_completion_tokens": 50}, "max_completion_tokens", {"max_tokens": 50}),
    ("mistral", "mistral-large-latest", {"seed": 7}, "seed", {"random_seed": 7}),
    ("mistral", "mistral-large-latest", {"stream_options": {"include_usage": True}}, "stream_options", {}),
    *[("mistral", "mistral-large-latest", {hint: "x"}, hint, {})
      for hint in ("user", "metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier")],
]
REFUSED: list[tuple[str, str, dict[str, Any], str]] = [
    ("mistral", "mistral-large-latest", {"logprobs": True}, "logprobs"),
    ("mistral", "mistral-large-latest", {"top_logprobs": 2}, "top_logprobs"),
    ("mistral", "mistral-large-latest", {"logit_bias": {"1": 1}}, "logit_bias"),
    ("groq", "llama-3.3-70b-versatile", {"logprobs": True}, "logprobs"),
    ("groq", "llama-3.3-70b-versatile", {"top_logprobs": 2}, "top_logprobs"),
    ("groq", "llama-3.3-70b-versatile", {"logit_bias": {"1": 1}}, "logit_bias"),
    ("groq", "llama-3.3-70b-versatile", {"n": 2}, "n"),
    ("deepseek", "deepseek-reasoner", {"logprobs": True}, "logprobs"),
    ("deepseek", "deepseek-reasoner", {"top_logprobs": 3}, "top_logprobs"),
    ("ollama", "llama3.2", {"n": 3}, "n"),
]
MESSAGE_FIELDS: list[tuple[str, str, str]] = [("groq", "llama-3.3-70b-versatile", "name")]


def build(kind: str, body: dict[str, Any], *, upstream: str = "m", key: str = "sk-host", base_url: str = "",
          stream: bool = False, headers: dict[str, str] | None = None) -> Any:
    provider = ProviderSpec(name="p", kind=kind, base_url=base_url)
    model = ModelSpec(name="pub", provider="p", upstream=upstream, capabilities=frozenset(CAPABILITIES))
    return get_adapter(kind).build_request(provider=provider, model=model, body=body, inbound="openai",
                                           stream=stream, api_key=key, client_headers=headers)


def test_every_rule_has_a_case() -> None:
    cases = ({(k, p) for k, _, _, p, _ in DROPPED_OR_RENAMED} | {(k, p) for k, _, _, p in REFUSED}
             | {(k, p) for k, _, p in MESSAGE_FIELDS})
    rules = {(kind, rule.param) for kind, preset in PRESETS.items() for rule in preset.rules}

    assert rules == cases
    assert {rule.action for preset in PRESETS.values() for rule in preset.rules} == {
        DROP, RENAME, REFUSE, DROP_MESSAGE_FIELD}


@pytest.mark.parametrize(("kind", "upstream", "extra", "param", "expected"), DROPPED_OR_RENAMED)
def test_a_parameter_the_host_spells_otherwise_or_refuses_harmlessly_is_renamed_or_dropped(
        kind: str, upstream: str, extra: dict[str, Any], param: str, expected: dict[str, Any]) -> None:
    sent = build(kind, {**BASE, **extra}, upstream=upstream).json

    assert param not in sent
    for key, value in expected.items():
        assert sent[key] == value


@pytest.mark.parametrize(("kind", "upstream", "extra", "param"), REFUSED)
def test_a_parameter_the_host_would_refuse_or_ignore_is_refused_with_a_400_naming_it(
        kind: str, upstream: str, extra: dict[str, Any], param: str) -> None:
    with pytest.raises(CapabilityError) as raised:
        build(kind, {**BASE, **extra}, upstream=upstream)

    assert raised.value.status == 400
    assert raised.value.param == param
    assert PRESETS[kind].label in raised.value.message


@pytest.mark.parametrize(("kind", "upstream", "field"), MESSAGE_FIELDS)
def test_a_message_field_the_host_refuses_is_dropped_without_touching_the_clients_body(
        kind: str, upstream: str, field: str) -> None:
    body = {**BASE, "messages": [dict(m) for m in BASE["messages"]]}
    sent = build(kind, body, upstream=upstream).json

    assert all(field not in message for message in sent["messages"])
    assert body["messages"][0][field] == "ann"


def test_values_that_ask_for_nothing_pass_and_rules_stay_on_their_host_and_model() -> None:
    assert build("groq", {**BASE, "n": 1, "logprobs": False}).json["n"] == 1
    assert build("deepseek", {**BASE, "logprobs": True}, upstream="deepseek-chat").json["logprobs"] is True
    assert build("together", {**BASE, "seed": 3, "logprobs": True}).json["seed"] == 3
    assert build("ollama", {**BASE, "n": 1}).json["n"] == 1


def test_mistral_streams_without_stream_options() -> None:
    sent = build("mistral", BASE, stream=True).json

    assert sent["stream"] is True
    assert "stream_options" not in sent


@pytest.mark.parametrize(("kind", "url"), [
    ("mistral", "https://api.mistral.ai/v1/chat/completions"),
    ("groq", "https://api.groq.com/openai/v1/chat/completions"),
    ("deepseek", "https://api.deepseek.com/v1/chat/completions"),
    ("together", "https://api.together.xyz/v1/chat/completions"),
    ("fireworks", "https://api.fireworks.ai/inference/v1/chat/completions"),
    ("openrouter", "https://openrouter.ai/api/v1/chat/completions"),
    ("ollama", "http://localhost:11434/v1/chat/completions"),
    ("vllm", "http://localhost:8000/v1/chat/completions"),
    ("lmstudio", "http://localhost:1234/v1/chat/completions"),
])
def test_each_preset_has_its_default_base_url_and_a_configured_one_wins(kind: str, url: str) -> None:
    assert build(kind, BASE).url == url
    assert build(kind, BASE, base_url="http://10.0.0.5:9000/v1").url == "http://10.0.0.5:9000/v1/chat/completions"


@pytest.mark.parametrize("kind", ["ollama", "vllm", "lmstudio"])
def test_a_local_server_gets_no_authorization_header_without_a_key_but_gets_one_with_a_key(kind: str) -> None:
    assert "Authorization" not in build(kind, BASE, key="").headers
    assert build(kind, BASE, key="local-secret").headers["Authorization"] == "Bearer local-secret"


def test_a_hosted_preset_always_sends_its_bearer_header() -> None:
    assert build("groq", BASE, key="").headers["Authorization"] == "Bearer "


def test_openrouter_receives_the_clients_attribution_headers_and_nothing_else() -> None:
    request = build("openrouter", BASE, headers={"HTTP-Referer": "https://app.example", "X-Title": "My App",
                                                 "Authorization": "Bearer client-key", "anthropic-beta": "x"})

    assert request.headers["HTTP-Referer"] == "https://app.example"
    assert request.headers["X-Title"] == "My App"
    assert request.headers["Authorization"] == "Bearer sk-host"
    assert "anthropic-beta" not in request.headers
    assert "X-Title" not in build("groq", BASE, headers={"X-Title": "My App"}).headers
