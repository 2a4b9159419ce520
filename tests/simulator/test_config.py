"""The simulator's configuration: YAML and dict forms, defaults, overrides, and refusals naming the entry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from routing.simulator import ConfigError, ModelBehaviour, load_config


def test_it_reads_a_yaml_file_with_defaults_models_and_faults(tmp_path: Path) -> None:
    path = tmp_path / "sim.yaml"
    path.write_text(
        "seed: 5\n"
        "strict_models: true\n"
        "record_limit: 50\n"
        "defaults: {latency_ms: 20, chunk_count: 3}\n"
        "models:\n"
        "  gpt-4o-mini:\n"
        "    ttfb_ms: 5\n"
        "    api_keys: [sk-a, sk-b]\n"
        "    input_price: 0.15\n"
        "    output_price: 0.6\n"
        "    faults: [{kind: rate_limit, times: 2}]\n"
        "faults:\n"
        "  /v1/messages: {kind: status, status: 529}\n",
        encoding="utf-8",
    )

    config = load_config(path)

    model = config.models["gpt-4o-mini"]
    assert (config.seed, config.strict_models, config.record_limit) == (5, True, 50)
    assert model.latency_ms == 20
    assert model.chunk_count == 3
    assert model.ttfb_ms == 5
    assert model.api_keys == ("sk-a", "sk-b")
    assert config.faults["gpt-4o-mini"][0].kind == "rate_limit"
    assert config.faults["/v1/messages"][0].param("status") == 529
    assert config.behaviour_for("unlisted") is None  # strict


def test_the_latency_flag_sets_the_latency_of_every_model_that_sets_none() -> None:
    config = load_config({"defaults": {"latency_ms": 5}, "models": {"m": {}, "own": {"latency_ms": 7}}},
                         latency_ms=50)

    assert config.defaults.latency_ms == 50
    assert config.behaviour_for("unlisted") == config.defaults
    assert config.models["m"].latency_ms == 50
    assert config.models["own"].latency_ms == 7


def test_an_unlisted_model_uses_the_defaults_unless_strict() -> None:
    config = load_config({"defaults": {"chunk_count": 2}})

    assert config.behaviour_for("anything") == ModelBehaviour(chunk_count=2)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"model": {}}, "model: unknown setting"),
        ({"models": {"m": {"latency": 5}}}, "models.m.latency: unknown setting"),
        ({"models": {"m": {"latency_ms": -1}}}, "models.m.latency_ms: expected a number >= 0"),
        ({"models": {"m": {"chunk_count": 0}}}, "models.m.chunk_count: expected an integer >= 1"),
        ({"models": {"m": {"api_keys": "sk-one"}}}, "models.m.api_keys: expected a list of key strings"),
        ({"models": {"m": {"faults": {"kind": "boom"}}}}, "models.m.faults.kind: unknown fault kind 'boom'"),
        ({"faults": {"*": [{"kind": "status"}]}}, "faults.*[0].status: required for kind 'status'"),
        ({"defaults": {"faults": [{"kind": "empty"}]}}, "defaults.faults: faults belong to a model"),
        ({"strict_models": "yes"}, "strict_models: expected true or false"),
        ({"models": ["m"]}, "models: expected a mapping"),
    ],
)
def test_it_refuses_a_bad_configuration_naming_the_entry(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(data)

    assert message in str(error.value)


def test_it_refuses_a_file_that_is_not_yaml(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("models: [unclosed\n", encoding="utf-8")

    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)


def test_it_refuses_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the file"):
        load_config(tmp_path / "absent.yaml")


def test_cost_uses_the_cached_price_for_cached_tokens() -> None:
    model = ModelBehaviour(input_price=2.0, output_price=8.0, cached_input_price=0.5)

    cost = model.cost_usd(input_tokens=1_000_000, cached_tokens=400_000, output_tokens=100_000)

    assert cost == pytest.approx(600_000 * 2.0 / 1e6 + 400_000 * 0.5 / 1e6 + 100_000 * 8.0 / 1e6)
    assert ModelBehaviour().cost_usd(input_tokens=10, cached_tokens=0, output_tokens=10) is None
