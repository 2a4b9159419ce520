"""Routing policies in the configuration file, the compiled table and the configuration revisions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from audit.models import ConfigRevision
from routing import models as m
from routing.config.file.dump import dump_config
from routing.config.file.load import load_config_file
from routing.config.file.parse import parse_config
from routing.config.file.schema import ConfigError
from routing.config.runtime import compile_table
from routing.config.versioning import current_version
from routing.core.policies import PolicySpec

pytestmark = pytest.mark.django_db

POLICIES = {
    "default": {"strategy": "priority"},
    "writer": {"strategy": "strength", "strength": "writing", "fallback_to": "default"},
    "cheap": {"strategy": "cost", "max_latency_ms": 5000, "fallback_to": "default"},
    "fast": {"strategy": "latency", "max_latency_ms": 800, "max_cost_usd": 0.05, "fallback_to": "cheap"},
}


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")


def config(policies: Any = None) -> dict[str, Any]:
    return {
        "providers": [{"name": "openai", "kind": "openai", "base_url": "http://127.0.0.1:1/v1",
                       "api_key": "${OPENAI_API_KEY}"}],
        "models": [{"provider": "openai", "upstream": "mini", "capabilities": ["text"], "strengths": ["writing"]}],
        "routing_policies": POLICIES if policies is None else policies,
    }


def write(tmp_path: Path, data: Any) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def problems_of(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(data)
    return caught.value.problems


def test_it_loads_dumps_and_loads_again_unchanged(tmp_path: Path) -> None:
    version = current_version()
    assert load_config_file(write(tmp_path, config()), author="test").changed
    assert current_version() == version + 1
    assert dump_config()["routing_policies"] == POLICIES
    assert not load_config_file(write(tmp_path, dump_config()), author="test").changed
    assert current_version() == version + 1


def test_the_table_holds_the_policies(tmp_path: Path) -> None:
    load_config_file(write(tmp_path, config()), author="test")
    table = compile_table(current_version())
    assert table.policies["fast"] == PolicySpec("fast", "latency", max_latency_ms=800, max_cost_usd=0.05,
                                                fallback_to="cheap")
    assert table.policies["writer"] == PolicySpec("writer", "strength", strength="writing", fallback_to="default")


def test_a_change_moves_the_version_and_is_in_the_revision(tmp_path: Path) -> None:
    load_config_file(write(tmp_path, config()), author="test")
    version = current_version()
    changed = {**POLICIES, "cheap": {"strategy": "cost", "fallback_to": "writer"}}
    assert load_config_file(write(tmp_path, config(changed)), author="ops").changed
    assert current_version() == version + 1
    revision = ConfigRevision.objects.order_by("-version").first()
    assert revision is not None
    assert revision.snapshot["routing_policies"]["cheap"] == {"strategy": "cost", "fallback_to": "writer"}


def test_a_strategy_defaults_to_priority() -> None:
    assert parse_config(config({"plain": {}}))["routing_policies"] == {"plain": {"strategy": "priority"}}


def test_cycles_are_refused_naming_them() -> None:
    problems = problems_of(config({"a": {"strategy": "cost", "fallback_to": "b"},
                                   "b": {"strategy": "latency", "fallback_to": "c"},
                                   "c": {"strategy": "priority", "fallback_to": "a"}}))
    assert "routing_policies.a.fallback_to: cycle: a -> b -> c -> a" in problems
    assert "routing_policies.c.fallback_to: cycle: c -> a -> b -> c" in problems


def test_a_cycle_through_a_stored_policy_is_refused(tmp_path: Path) -> None:
    load_config_file(write(tmp_path, config({"stored": {"strategy": "cost"}})), author="test")
    m.RoutingPolicy.objects.filter(name="stored").update(
        fallback_to=m.RoutingPolicy.objects.create(name="other", strategy="priority"))
    problems = problems_of(config({"other": {"strategy": "priority", "fallback_to": "stored"}}))
    assert problems == ["routing_policies.other.fallback_to: cycle: other -> stored -> other"]


@pytest.mark.parametrize(("policy", "problem"), [
    ({"strategy": "random"}, 'routing_policies.p.strategy: unknown strategy "random"'),
    ({"strategy": "strength"}, "routing_policies.p.strength: the strength strategy needs a strength"),
    ({"strategy": "cost", "strength": "poetry"}, 'routing_policies.p.strength: unknown strength "poetry"'),
    ({"strategy": "cost", "max_cost_usd": -1}, "routing_policies.p.max_cost_usd: must be a number greater than 0"),
    ({"strategy": "cost", "max_latency_ms": "fast"}, "routing_policies.p.max_latency_ms: must be a whole number"),
    ({"strategy": "cost", "max_latency_ms": 0.5}, "routing_policies.p.max_latency_ms: must be a whole number"),
    ({"strategy": "cost", "fallback_to": "nowhere"}, 'routing_policies.p.fallback_to: unknown policy "nowhere"'),
    ({"strategy": "cost", "speed": 1}, "routing_policies.p.speed: unknown field"),
    ("cost", "routing_policies.p: expected a mapping"),
])
def test_bad_policies_are_refused_naming_the_field(policy: Any, problem: str) -> None:
    problems = problems_of(config({"p": policy}))
    assert any(found.startswith(problem) for found in problems), problems


def test_a_bad_section_or_name_is_refused() -> None:
    assert problems_of(config(["a"]))[0].startswith("routing_policies: expected a mapping")
    assert problems_of(config({"bad name!": {"strategy": "cost"}}))[0].startswith("routing_policies.bad name!:")


def test_prune_deletes_policies_the_file_leaves_out(tmp_path: Path) -> None:
    load_config_file(write(tmp_path, config()), author="test")
    load_config_file(write(tmp_path, config({"default": {"strategy": "cost"}})), author="test", prune=True)
    assert list(m.RoutingPolicy.objects.values_list("name", flat=True)) == ["default"]
    assert dump_config()["routing_policies"] == {"default": {"strategy": "cost"}}


def test_prune_refuses_to_leave_a_policy_falling_back_to_a_deleted_one(tmp_path: Path) -> None:
    load_config_file(write(tmp_path, config()), author="test")
    kept = m.RoutingPolicy.objects.get(name="cheap")
    # The file names "cheap" unchanged but not its fallback "default": pruning would leave it dangling.
    with pytest.raises(ConfigError) as caught:
        load_config_file(write(tmp_path, {**config({"cheap": POLICIES["cheap"]})}), author="test", prune=True)
    assert any("routing_policies.cheap.fallback_to" in p for p in caught.value.problems)
    assert m.RoutingPolicy.objects.get(pk=kept.pk).fallback_to is not None
