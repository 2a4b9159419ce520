"""Category routes, model strengths and category keywords in the configuration file and the compiled table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from routing import models as m
from routing.config.file.dump import dump_config, dump_yaml
from routing.config.file.load import load_config_file
from routing.config.file.parse import parse_config
from routing.config.file.schema import ConfigError
from routing.config.runtime import compile_table
from routing.config.versioning import current_version
from routing.core.table import CategoryRouteSpec

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")


def config() -> dict[str, Any]:
    return {
        "providers": [{"name": "openai", "kind": "openai", "base_url": "http://127.0.0.1:1/v1",
                       "api_key": "${OPENAI_API_KEY}"}],
        "models": [
            {"provider": "openai", "upstream": "coder", "capabilities": ["text"], "strengths": ["code", "math"]},
            {"provider": "openai", "upstream": "writer", "capabilities": ["text"], "strengths": ["writing"]},
            {"provider": "openai", "upstream": "eye", "capabilities": ["text", "image"], "strengths": ["vision"]},
            {"provider": "openai", "upstream": "mini", "capabilities": ["text"]},
        ],
        "virtual_models": [{"source": "writers", "strategy": "round_robin",
                            "targets": [{"model": "openai/writer"}, {"model": "openai/mini"}]}],
        "tier_routes": {"coding": {"easy": "openai/mini", "hard": "openai/coder"}},
        "category_routes": {"smart": {"code": "coding", "writing": "writers", "vision": "openai/eye",
                                      "default": "openai/mini"}},
        "settings": {"category_keywords": {"writing": ["limerick", "Gedicht"]}, "category_long_context_tokens": 50000},
    }


def write(tmp_path: Path, data: Any) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    return str(path)


def problems_of(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(data)
    return caught.value.problems


def test_it_loads_dumps_and_loads_again_unchanged(tmp_path: Path) -> None:
    assert load_config_file(write(tmp_path, config()), author="test").changed
    dumped = dump_config()
    assert dumped["category_routes"] == config()["category_routes"]
    assert dumped["models"][0]["strengths"] == ["code", "math"]
    assert "strengths" not in dumped["models"][3]  # the default (none) is left out
    assert dumped["settings"]["category_keywords"] == {"writing": ["limerick", "Gedicht"]}
    version = current_version()
    again = load_config_file(write(tmp_path, yaml.safe_load(dump_yaml(dumped))), author="test")
    assert not again.changed
    assert current_version() == version
    assert dump_config() == dumped


def test_the_compiled_table_holds_routes_strengths_and_keywords(tmp_path: Path) -> None:
    load_config_file(write(tmp_path, config()), author="test")
    table = compile_table(current_version())
    route = table.category_routes["smart"]
    assert route == CategoryRouteSpec(alias="smart", targets={"code": "coding", "writing": "writers",
                                                              "vision": "openai/eye"}, default="openai/mini")
    assert route.target_for("math") == "openai/mini"
    assert table.kind_of("smart") == "category"
    assert "smart" in table.public_names()
    assert table.models["openai/coder"].strengths == frozenset({"code", "math"})
    assert table.settings.category_keywords == (("writing", ("limerick", "Gedicht")),)
    assert table.settings.category_long_context_tokens == 50000
    assert {m.name for m in table.leaf_models("smart")} == {"openai/mini", "openai/coder", "openai/writer",
                                                             "openai/eye"}


def test_a_change_to_a_category_route_moves_the_version_and_prune_removes_it(tmp_path: Path) -> None:
    load_config_file(write(tmp_path, config()), author="test")
    version = current_version()
    changed = config()
    changed["category_routes"]["smart"]["math"] = "openai/coder"
    assert load_config_file(write(tmp_path, changed), author="test").changed
    assert current_version() == version + 1
    assert m.CategoryRoute.objects.get(alias="smart").math == "openai/coder"
    pruned = config()
    del pruned["category_routes"]
    load_config_file(write(tmp_path, pruned), author="test", prune=True)
    assert not m.CategoryRoute.objects.exists()


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda c: c["category_routes"]["smart"].update(code="nope"),
         'category_routes.smart.code: unknown model "nope"'),
        (lambda c: c["category_routes"]["smart"].pop("default"),
         "category_routes.smart.default: a category route needs a default target"),
        (lambda c: c["category_routes"]["smart"].update(poetry="writers"),
         "category_routes.smart.poetry: unknown category"),
        (lambda c: c["category_routes"]["smart"].update(math="smart"),
         "category_routes.smart.math: cycle: smart -> smart"),
        (lambda c: c["category_routes"].update(other={"default": "smart"}),
         'category_routes.other.default: "smart" is a category route'),
        (lambda c: c["category_routes"]["smart"].update(writing=3),
         "category_routes.smart.writing: expected a model, virtual model or tier alias name"),
        (lambda c: c["category_routes"].update(coding={"default": "openai/mini"}),
         'category_routes.coding: "coding" is already a tier alias name'),
        (lambda c: c["category_routes"]["smart"].update(contract="nope"),
         "category_routes.smart.contract: unknown contract"),
        (lambda c: c.update(category_routes=["smart"]), "category_routes: expected a mapping"),
        (lambda c: c["models"][0].update(strengths=["code", "po/etry"]),
         "models[0].strengths[1]: the strength 'po/etry' is not a tag"),
        (lambda c: c["models"][0].update(strengths="code"), "models[0].strengths: expected a list of tags"),
        (lambda c: c["settings"].update(category_keywords={"vision": ["photo"]}),
         "settings.category_keywords: Unknown keyword categories: vision"),
        (lambda c: c["settings"].update(category_keywords={"code": []}),
         "settings.category_keywords: The keywords of code must be a non-empty list"),
        (lambda c: c["settings"].update(category_long_context_tokens=0),
         "settings.category_long_context_tokens: The long-context threshold must be between"),
    ],
)
def test_it_refuses_bad_category_configuration_naming_the_field(mutate: Any, expected: str) -> None:
    data = config()
    mutate(data)
    problems = problems_of(data)
    assert any(p.startswith(expected) for p in problems), problems


def test_a_cycle_through_two_routes_is_named(tmp_path: Path) -> None:
    data = config()
    data["category_routes"]["other"] = {"default": "openai/mini", "code": "smart"}
    data["category_routes"]["smart"]["code"] = "other"
    problems = problems_of(data)
    assert "category_routes.smart.code: cycle: smart -> other -> smart" in problems
    assert "category_routes.other.code: cycle: other -> smart -> other" in problems


def test_a_route_may_point_at_what_is_already_configured(tmp_path: Path) -> None:
    load_config_file(write(tmp_path, config()), author="test")
    only_route = {"category_routes": {"second": {"math": "coding", "default": "writers"}}}
    assert load_config_file(write(tmp_path, only_route), author="test").changed
    assert m.CategoryRoute.objects.get(alias="second").default_target == "writers"


def test_a_model_may_not_take_a_category_route_name(tmp_path: Path) -> None:
    load_config_file(write(tmp_path, config()), author="test")
    clash = {"virtual_models": [{"source": "smart", "strategy": "failover", "targets": [{"model": "openai/mini"}]}]}
    problems = problems_of(clash)
    assert 'virtual_models: the public name "smart" is already used by a category route' in problems
