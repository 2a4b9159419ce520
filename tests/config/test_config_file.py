"""Loading, checking and dumping the declarative configuration file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from routing import models as m
from routing.config.file.dump import dump_config, dump_yaml
from routing.config.file.load import load_config_file
from routing.config.file.parse import parse_config
from routing.config.file.schema import ConfigError
from routing.config.versioning import current_version

DEMO = Path(__file__).resolve().parents[2] / "routing" / "demo" / "demo.yaml"

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEMO_PROVIDER_KEY", "sk-test-demo")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")


def write(tmp_path: Path, data: object) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return str(path)


def base_config() -> dict:
    return {
        "providers": [{"name": "openai", "kind": "openai", "base_url": "http://127.0.0.1:1/v1",
                       "api_key": "${OPENAI_API_KEY}"}],
        "models": [{"provider": "openai", "upstream": "gpt-4o-mini", "input_price": 0.15, "output_price": 0.6,
                    "capabilities": ["text", "image"]},
                   {"provider": "openai", "upstream": "gpt-5", "capabilities": ["text"]}],
        "virtual_models": [{"source": "fast", "strategy": "round_robin",
                            "targets": [{"model": "openai/gpt-4o-mini"}, {"model": "openai/gpt-5", "weight": 2}]}],
        "tier_routes": {"normal": {"easy": "fast", "hard": "openai/gpt-5"}},
    }


def test_it_loads_the_demo_config_and_dumps_it_back_equal(tmp_path: Path) -> None:
    result = load_config_file(str(DEMO), author="test")
    assert result.changed
    dumped = dump_config()
    path = write(tmp_path, dump_yaml(dumped))
    again = load_config_file(path, author="test")
    assert not again.changed
    assert dump_config() == dumped
    assert parse_config(yaml.safe_load(DEMO.read_text())) == dumped


def test_it_changes_nothing_when_the_same_file_is_loaded_twice(tmp_path: Path) -> None:
    path = write(tmp_path, base_config())
    first = load_config_file(path, author="test")
    version = current_version()
    second = load_config_file(path, author="test")
    assert first.changed
    assert not second.changed
    assert current_version() == version


def test_it_keeps_key_references_as_references() -> None:
    load_config_file(str(DEMO), author="test")
    text = dump_yaml(dump_config())
    assert "${DEMO_PROVIDER_KEY}" in text
    assert "sk-test-demo" not in text
    assert set(m.ProviderKey.objects.values_list("reference", flat=True)) == {"${DEMO_PROVIDER_KEY}"}


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda c: c["virtual_models"][0]["targets"].append({"model": "x"}),
         'virtual_models[0].targets[2].model: unknown model "x"'),
        (lambda c: c["virtual_models"][0].update(strategy="fastest"),
         'virtual_models[0].strategy: unknown strategy "fastest"'),
        (lambda c: c["virtual_models"][0]["targets"][0].update(weight=0),
         "virtual_models[0].targets[0].weight: the weight must be greater than 0"),
        (lambda c: c["providers"][0].update(api_key="${NOT_SET_ANYWHERE}"),
         "providers[0].api_key: environment variable NOT_SET_ANYWHERE is not set"),
        (lambda c: c["providers"][0].update(api_key="sk-raw-key-pasted-here"),
         "providers[0].api_key: expected a reference to an environment variable"),
        (lambda c: c["models"][0].update(capabilities=["text", "telepathy"]),
         "models[0].capabilities: expected a list of"),
        (lambda c: c["models"].append({"provider": "nope", "upstream": "m"}),
         'models[2].provider: unknown provider "nope"'),
        (lambda c: c["tier_routes"]["normal"].update(hard="missing"),
         'tier_routes.normal.hard: unknown model "missing"'),
        (lambda c: c["models"].append(dict(c["models"][0])),
         'models[2].name: "openai/gpt-4o-mini" appears twice'),
        (lambda c: c.update(contracts=[{"workload": "x", "structured_output": {"required": True,
                                                                               "schema": {"type": "nope"}}}]),
         "contracts[0].structured_output.schema: Invalid JSON schema"),
        (lambda c: c.update(settings={"min_weight_fraction": 0.9}),
         "settings.min_weight_fraction: The minimum weight fraction must be between 0 and 0.5."),
        (lambda c: c["virtual_models"].append({"source": "openai/gpt-5", "targets": ["fast"]}),
         "is already used in models"),
        (lambda c: c["models"][0].update(input_price="cheap"),
         "models[0].input_price: expected a number, got 'cheap'"),
        (lambda c: c["models"][0].update(output_price=[]), "models[0].output_price: expected a number"),
        (lambda c: c["providers"].append("just a name"), "providers[1]: expected a mapping"),
    ],
)
def test_it_refuses_a_bad_file_naming_the_path(tmp_path: Path, mutate, expected: str) -> None:  # type: ignore[no-untyped-def]
    config = base_config()
    mutate(config)
    with pytest.raises(ConfigError) as caught:
        load_config_file(write(tmp_path, config), author="test")
    assert any(expected in problem for problem in caught.value.problems), caught.value.problems


def test_it_refuses_cycles_and_deep_nesting(tmp_path: Path) -> None:
    config = base_config()
    config["virtual_models"] += [
        {"source": "a", "targets": ["b"]},
        {"source": "b", "targets": ["a"]},
    ]
    with pytest.raises(ConfigError) as caught:
        load_config_file(write(tmp_path, config), author="test")
    assert any("cycle: a -> b -> a" in p for p in caught.value.problems), caught.value.problems

    config = base_config()
    chain = [{"source": f"v{i}", "targets": [f"v{i + 1}"]} for i in range(9)]
    chain.append({"source": "v9", "targets": ["openai/gpt-5"]})
    config["virtual_models"] += chain
    with pytest.raises(ConfigError) as caught:
        load_config_file(write(tmp_path, config), author="test")
    assert any("at most 8" in p for p in caught.value.problems), caught.value.problems


def test_it_applies_nothing_of_a_file_with_one_bad_entry(tmp_path: Path) -> None:
    config = base_config()
    config["virtual_models"][0]["targets"].append({"model": "x"})
    with pytest.raises(ConfigError):
        load_config_file(write(tmp_path, config), author="test")
    assert not m.Provider.objects.exists()
    assert not m.ProviderModel.objects.exists()
    assert current_version() == 0


def test_it_prunes_only_when_asked(tmp_path: Path) -> None:
    load_config_file(write(tmp_path, base_config()), author="test")
    smaller = base_config()
    smaller["tier_routes"] = {}
    load_config_file(write(tmp_path, smaller), author="test")
    assert m.TierRoute.objects.filter(alias="normal").exists()
    load_config_file(write(tmp_path, smaller), author="test", prune=True)
    assert not m.TierRoute.objects.exists()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("providers: [unclosed", "malformed YAML at line 1"),
        ("virtual_models:\n  - {source: v, strategy: fastest, targets: [openai/gpt-5]}\n",
         'unknown strategy "fastest"'),
        ("providers:\n  - {name: p, kind: openai, base_url: 'http://x', api_key: '${MISSING_KEY_VAR}'}\n",
         "environment variable MISSING_KEY_VAR is not set"),
    ],
)
def test_the_command_exits_non_zero_with_a_clear_message(tmp_path: Path, content: str, expected: str) -> None:
    path = write(tmp_path, content)
    with pytest.raises(CommandError) as caught:
        call_command("loadconfig", path)
    assert expected in str(caught.value)


def test_the_command_line_prints_no_traceback_for_a_bad_file(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = write(tmp_path, "providers: [unclosed")
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path}/db.sqlite3")
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=root, env=env, check=True)
    done = subprocess.run([sys.executable, "manage.py", "loadconfig", path], cwd=root, env=env,
                          capture_output=True, text=True)
    assert done.returncode != 0
    assert "malformed YAML" in done.stderr
    assert "Traceback" not in done.stderr


def test_dumpconfig_writes_the_loaded_file(tmp_path: Path) -> None:
    call_command("loadconfig", str(DEMO))
    out = tmp_path / "dump.yaml"
    call_command("dumpconfig", "-o", str(out))
    assert yaml.safe_load(out.read_text()) == dump_config()


ODD_VALUES = [None, 1, -5, 0.5, True, "x", "", "${NOT_SET_ANYWHERE}", "sk-raw-key-pasted-here", [], {}, ["a"],
              [{"model": []}], {"easy": [], "hard": {}, "contract": []}]


def test_any_mangled_file_is_refused_with_paths_never_an_exception() -> None:
    """Seeded random damage to a valid file: each result is a parsed file or a ConfigError naming paths."""
    import copy
    import random

    rng = random.Random(7)
    for _ in range(400):
        config = copy.deepcopy(base_config())
        for _ in range(rng.randint(1, 4)):
            section = rng.choice(["providers", "models", "virtual_models", "tier_routes"])
            value = config[section]
            if isinstance(value, list):
                i = rng.randrange(len(value))
                if rng.random() < 0.15 or not isinstance(value[i], dict) or not value[i]:
                    value[i] = rng.choice(ODD_VALUES)
                else:
                    value[i][rng.choice(list(value[i]))] = rng.choice(ODD_VALUES)
            elif value:
                value[rng.choice(list(value))] = rng.choice(ODD_VALUES)
        try:
            parse_config(config)
        except ConfigError as error:  # a fuzz loop: each damaged file either parses or is refused naming paths
            problems = error.problems
            assert problems, "a ConfigError without problems"
            assert all(": " in problem for problem in problems), problems
