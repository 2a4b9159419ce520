"""Model strengths as free-form tags in the configuration file: the router-design article's example loads, a
policy selects by any tag a model carries, and a tag no model carries is refused naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from routing import models as m
from routing.config.file.dump import dump_config
from routing.config.file.load import load_config_file
from routing.config.file.parse import parse_config
from routing.config.file.schema import ConfigError
from routing.config.runtime import compile_table
from routing.config.versioning import current_version
from routing.core.policies import PolicySpec

pytestmark = pytest.mark.django_db

EXAMPLE = Path(__file__).with_name("router_design_example.yaml")


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_KEY"):
        monkeypatch.setenv(name, f"test-{name.lower()}")


def config(strengths: list[Any], policies: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "providers": [{"name": "openai", "kind": "openai", "base_url": "http://127.0.0.1:1/v1",
                       "api_key": "${OPENAI_API_KEY}"}],
        "models": [{"provider": "openai", "upstream": "mini", "strengths": strengths}],
        "routing_policies": policies or {},
    }


def problems_of(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(data)
    return caught.value.problems


def test_it_loads_the_router_design_articles_example_through_the_file_loader() -> None:
    result = load_config_file(str(EXAMPLE), author="test")
    assert result.changed
    table = compile_table(current_version())
    assert table.models["openai-gpt-4"].strengths == frozenset({"general", "reasoning", "analysis"})
    assert table.models["azure-gpt-35-turbo"].strengths == frozenset({"general", "fast"})
    assert table.policies["creative_writing"] == PolicySpec("creative_writing", "strength", strength="writing",
                                                            fallback_to="default")
    assert table.policies["low_cost"] == PolicySpec("low_cost", "cost", max_latency_ms=5000, fallback_to="default")
    dumped = dump_config()
    assert dumped["models"][0]["strengths"] == ["general", "reasoning", "analysis"]
    assert not load_config_file(str(EXAMPLE), author="test").changed  # loading it again changes nothing


def test_a_policy_selects_by_a_tag_a_model_carries(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config(["reasoning", "fast"], {"think": {"strategy": "strength",
                                                                           "strength": "reasoning"}})))
    load_config_file(str(path), author="test")
    table = compile_table(current_version())
    assert table.models["openai/mini"].strengths == frozenset({"reasoning", "fast"})
    assert table.policies["think"].strength == "reasoning"
    assert m.RoutingPolicy.objects.get(name="think").strength == "reasoning"


def test_a_policy_naming_a_tag_no_model_carries_is_refused_naming_it() -> None:
    [problem] = problems_of(config(["reasoning"], {"think": {"strategy": "strength", "strength": "reasonnig"}}))
    assert problem.startswith('routing_policies.think.strength: unknown strength "reasonnig": neither a category '
                              "nor a tag a model carries. Did you mean `reasoning`?")


def test_a_tag_carried_by_a_model_already_configured_counts() -> None:
    load_config_file(str(EXAMPLE), author="test")
    parse_config({"routing_policies": {"quick": {"strategy": "strength", "strength": "fast"}}})


def test_the_file_may_not_take_away_the_last_tag_a_configured_policy_selects_by(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config(["fast"], {"quick": {"strategy": "strength", "strength": "fast"}})))
    load_config_file(str(path), author="test")
    problems = problems_of({"models": [{"provider": "openai", "upstream": "mini", "strengths": ["code"]}]})
    assert problems == ['routing_policies.quick.strength: the configured policy selects by a tag no model would '
                        'carry any more: unknown strength "fast": neither a category nor a tag a model carries. '
                        "Known: code, writing, analysis, math, vision, long_context, general."]


@pytest.mark.parametrize(("strengths", "path"), [
    (["two words"], "models[0].strengths[0]"),
    (["ok", "a/b"], "models[0].strengths[1]"),
    ([7], "models[0].strengths[0]"),
    ("reasoning", "models[0].strengths"),
])
def test_a_strength_that_is_not_a_tag_is_refused_naming_its_place(strengths: Any, path: str) -> None:
    [problem] = problems_of(config(strengths))
    assert problem.startswith(f"{path}: ")
