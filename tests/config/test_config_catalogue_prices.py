"""``prices: catalogue`` on a model entry of the configuration file, and ``prices_as_of``."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from routing import models as m
from routing.config.catalogue import catalogue
from routing.config.file.dump import dump_config, dump_yaml
from routing.config.file.load import load_config_file
from routing.config.file.parse import parse_config
from routing.config.file.schema import ConfigError

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-anthropic")


def config(*models: dict) -> dict:
    return {
        "providers": [
            {"name": "openai", "kind": "openai", "base_url": "http://127.0.0.1:1/v1", "api_key": "${OPENAI_API_KEY}"},
            {"name": "claude", "kind": "anthropic", "base_url": "http://127.0.0.1:2",
             "api_key": "${ANTHROPIC_API_KEY}"},
        ],
        "models": list(models),
    }


def write(tmp_path: Path, data: object) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return str(path)


def problems_of(data: dict) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(data)
    return caught.value.problems


def test_it_fills_prices_limits_and_capabilities_from_the_catalogue() -> None:
    entry = catalogue().lookup("openai", "gpt-4o-mini")
    assert entry is not None
    canonical = parse_config(config({"provider": "openai", "upstream": "gpt-4o-mini", "prices": "catalogue"}))
    assert canonical["models"] == [{
        "provider": "openai", "upstream": "gpt-4o-mini", "input_price": 0.15, "output_price": 0.6,
        "cached_input_price": 0.075, "prices_as_of": entry.as_of.isoformat(), "context_window": 128000,
        "max_output_tokens": 16384, "capabilities": ["text", "image", "tools", "json_schema"]}]


def test_it_lets_the_entry_narrow_limits_and_capabilities_but_not_prices() -> None:
    canonical = parse_config(config({"provider": "claude", "upstream": "claude-haiku-4-5", "prices": "catalogue",
                                     "context_window": 100000, "capabilities": ["text", "tools"]}))
    model = canonical["models"][0]
    assert (model["input_price"], model["output_price"], model["cached_input_price"]) == (1.0, 5.0, 0.1)
    assert (model["context_window"], model["max_output_tokens"], model["capabilities"]) == (
        100000, 64000, ["text", "tools"])
    problems = problems_of(config({"provider": "openai", "upstream": "gpt-4o", "prices": "catalogue",
                                   "input_price": 2.0}))
    assert problems == ["models[0].prices: prices: catalogue sets input_price: give one or the other"]


def test_it_refuses_an_uncatalogued_model_naming_it_and_the_closest_names() -> None:
    problems = problems_of(config({"provider": "openai", "upstream": "gpt-4o-mni", "prices": "catalogue"}))
    assert len(problems) == 1
    assert problems[0].startswith('models[0].prices: "gpt-4o-mni" is not in the price catalogue for openai '
                                  "providers. Did you mean `gpt-4o-mini`")
    far = problems_of(config({"provider": "claude", "upstream": "my-fine-tune", "prices": "catalogue"}))
    assert far[0].startswith('models[0].prices: "my-fine-tune" is not in the price catalogue for anthropic '
                             "providers; it lists claude-haiku-4-5")


def test_it_refuses_a_kind_the_catalogue_does_not_list_and_any_other_prices_value(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "sk-test-azure")
    data = config({"provider": "azure", "upstream": "gpt-4o", "prices": "catalogue"},
                  {"provider": "openai", "upstream": "gpt-4o", "prices": "list"})
    data["providers"].append({"name": "azure", "kind": "azure_openai", "base_url": "https://x.openai.azure.com",
                              "api_version": "2024-10-21", "api_key": "${AZURE_OPENAI_API_KEY}"})
    assert problems_of(data) == [
        'models[0].prices: "gpt-4o" is not in the price catalogue for azure_openai providers (it lists no '
        "azure_openai model); give the prices instead",
        "models[1].prices: expected catalogue (the only value), got 'list'",
    ]


def test_it_uses_the_kind_of_a_provider_already_in_the_database(tmp_path: Path) -> None:
    load_config_file(write(tmp_path, config()), author="test")
    canonical = parse_config({"models": [{"provider": "claude", "upstream": "claude-opus-4-5", "prices": "catalogue"}]})
    assert canonical["models"][0]["input_price"] == 5.0


def test_it_stores_the_catalogue_date_and_dumps_a_file_that_loads_unchanged(tmp_path: Path) -> None:
    path = write(tmp_path, config({"provider": "openai", "upstream": "gpt-4.1", "prices": "catalogue"},
                                  {"provider": "openai", "upstream": "gpt-5", "input_price": 1.0, "output_price": 8.0,
                                   "prices_as_of": dt.date(2026, 6, 1)}))
    assert load_config_file(path, author="test").changed
    gpt41 = m.ProviderModel.objects.get(name="openai/gpt-4.1")
    entry = catalogue().lookup("openai", "gpt-4.1")
    assert entry is not None
    assert gpt41.prices_as_of == entry.as_of
    assert gpt41.input_price == Decimal("2.0")
    assert gpt41.context_window == 1047576
    assert m.ProviderModel.objects.get(name="openai/gpt-5").prices_as_of == dt.date(2026, 6, 1)
    assert not load_config_file(path, author="test").changed  # the same file again: nothing moves
    dumped = dump_config()
    assert [model.get("prices_as_of") for model in dumped["models"]] == [entry.as_of.isoformat(), "2026-06-01"]
    assert not load_config_file(write(tmp_path, dump_yaml(dumped)), author="test").changed
    assert dump_config() == dumped


def test_it_refuses_a_prices_as_of_that_is_not_a_date() -> None:
    problems = problems_of(config({"provider": "openai", "upstream": "gpt-5", "input_price": 1.0,
                                   "prices_as_of": "last week"}))
    assert problems == ["models[0].prices_as_of: expected a date such as 2026-12-02, got 'last week'"]
