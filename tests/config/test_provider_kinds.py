"""The Cohere kind and the OpenAI-compatible preset kinds in the config file and the admin: accepted, a preset's
base URL filled in when left out, refusals naming the field, and every kind backed by an adapter."""

from __future__ import annotations

import pytest
from django.test import Client

from routing import models as m
from routing.config.file.apply import apply_config
from routing.config.file.dump import dump_config
from routing.config.file.parse import parse_config
from routing.config.file.schema import ConfigError
from routing.config.runtime import compile_table
from routing.core.table import PROVIDER_KINDS
from routing.providers import get_adapter
from routing.providers.openai.presets import PRESETS

pytestmark = pytest.mark.django_db

PRESET_URLS = {
    "mistral": "https://api.mistral.ai/v1", "groq": "https://api.groq.com/openai/v1",
    "deepseek": "https://api.deepseek.com/v1", "together": "https://api.together.xyz/v1",
    "fireworks": "https://api.fireworks.ai/inference/v1", "openrouter": "https://openrouter.ai/api/v1",
    "ollama": "http://localhost:11434/v1", "vllm": "http://localhost:8000/v1", "lmstudio": "http://localhost:1234/v1",
}



def test_every_kind_has_an_adapter_and_a_label_and_every_adapter_a_kind() -> None:
    assert {get_adapter(kind).kind for kind in PROVIDER_KINDS} == set(PROVIDER_KINDS)
    assert {"cohere", *PRESETS} <= set(PROVIDER_KINDS)
    assert set(m.PROVIDER_KIND_LABELS) == set(PROVIDER_KINDS)
    assert {kind: preset.base_url for kind, preset in PRESETS.items()} == PRESET_URLS


def test_the_config_file_takes_cohere_and_presets_and_fills_a_preset_s_base_url() -> None:
    parsed = parse_config({"providers": [
        {"name": "co", "kind": "cohere", "base_url": "https://api.cohere.com"},
        {"name": "gq", "kind": "groq"},
        {"name": "lm", "kind": "lmstudio", "base_url": "http://10.0.0.7:1234/v1"},
    ], "models": [{"provider": "co", "upstream": "command-a-03-2025"}, {"provider": "gq", "upstream": "llama"}]})
    apply_config(parsed, author="test")

    table = compile_table(1)
    assert {name: (p.kind, p.base_url) for name, p in table.providers.items()} == {
        "co": ("cohere", "https://api.cohere.com"), "gq": ("groq", "https://api.groq.com/openai/v1"),
        "lm": ("lmstudio", "http://10.0.0.7:1234/v1")}
    dumped = {p["name"]: p for p in dump_config()["providers"]}
    assert dumped["gq"]["kind"] == "groq"
    assert dumped["gq"]["base_url"] == "https://api.groq.com/openai/v1"
    assert parse_config(dump_config())  # the dump reads back


@pytest.mark.parametrize(("provider", "problem"), [
    ({"name": "co", "kind": "cohere"}, "providers[0].base_url: expected an http(s) URL"),
    ({"name": "x", "kind": "cohere-v3", "base_url": "https://x"}, "providers[0].kind: unknown kind 'cohere-v3'"),
    ({"name": "g", "kind": "groq", "base_url": "api.groq.com"}, "providers[0].base_url: expected an http(s) URL"),
])
def test_the_config_file_refuses_a_bad_kind_or_base_url_naming_the_field(provider: dict[str, str],
                                                                         problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"providers": [provider]})

    assert any(p.startswith(problem) for p in caught.value.problems), caught.value.problems


def test_an_unknown_kind_lists_the_new_kinds() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"providers": [{"name": "x", "kind": "nope", "base_url": "https://x"}]})

    assert "cohere" in caught.value.problems[0]
    assert "lmstudio" in caught.value.problems[0]


def provider_post(**fields: str) -> dict[str, str]:
    return {"timeout_seconds": "600", "enabled": "on", "keys-TOTAL_FORMS": "0", "keys-INITIAL_FORMS": "0",
            "keys-MIN_NUM_FORMS": "0", "keys-MAX_NUM_FORMS": "1000", **fields}


def test_the_admin_saves_a_cohere_provider_and_a_preset_with_its_default_base_url(admin_client: Client) -> None:
    form = admin_client.get("/admin/routing/provider/add/").content.decode()
    assert 'value="cohere"' in form
    assert 'value="openrouter"' in form

    cohere = admin_client.post("/admin/routing/provider/add/", provider_post(
        name="co", kind="cohere", base_url="https://api.cohere.com"))
    ollama = admin_client.post("/admin/routing/provider/add/", provider_post(name="local", kind="ollama",
                                                                             base_url=""))

    assert (cohere.status_code, ollama.status_code) == (302, 302)
    assert m.Provider.objects.get(name="co").kind == "cohere"
    assert m.Provider.objects.get(name="local").base_url == "http://localhost:11434/v1"


def test_the_admin_refuses_an_empty_base_url_for_a_kind_without_a_default(admin_client: Client) -> None:
    response = admin_client.post("/admin/routing/provider/add/", provider_post(name="co", kind="cohere",
                                                                               base_url=""))

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert any("base URL" in e for e in errors["base_url"]), errors
    assert not m.Provider.objects.exists()
