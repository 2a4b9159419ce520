"""The config file's ``teams:`` section: loaded, checked (errors name the field), dumped back equal, pruned."""

from __future__ import annotations

from decimal import Decimal
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

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")


def config(**extra: Any) -> dict[str, Any]:
    return {
        "providers": [{"name": "openai", "kind": "openai", "base_url": "http://127.0.0.1:1/v1",
                       "api_key": "${OPENAI_API_KEY}"}],
        "models": [{"provider": "openai", "upstream": "gpt-4o-mini", "capabilities": ["text"]}],
        **extra,
    }


TEAMS = [
    {"name": "research", "rpm": 600, "tpm": 2_000_000, "max_concurrency": 20, "budget_usd": 500,
     "budget_period": "week", "allowed_models": ["openai/gpt-4o-mini"]},
    {"name": "interns", "budget_usd": 12.5, "alert_webhook_url": "https://hooks.example.com/gomodel?token=t0k"},
    {"name": "unlimited"},
]


def load(tmp_path: Path, data: dict[str, Any], *, prune: bool = False) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    load_config_file(str(path), author="test", prune=prune)


def test_teams_load_and_dump_back_equal(tmp_path: Path) -> None:
    load(tmp_path, config(teams=TEAMS))
    research = m.Team.objects.get(name="research")
    assert (research.rpm, research.tpm, research.max_concurrency) == (600, 2_000_000, 20)
    assert (research.budget_usd, research.budget_period) == (Decimal("500"), "week")
    assert research.allowed_models == ["openai/gpt-4o-mini"]
    interns = m.Team.objects.get(name="interns")
    assert (interns.rpm, interns.budget_usd, interns.budget_period) == (None, Decimal("12.5"), "month")
    assert interns.alert_webhook_url == "https://hooks.example.com/gomodel?token=t0k"
    assert dump_config()["teams"] == TEAMS
    again = tmp_path / "again.yaml"
    again.write_text(dump_yaml(dump_config()))
    version = current_version()
    assert load_config_file(str(again), author="test").changed is False  # dump -> load changes nothing
    assert current_version() == version


def test_a_changed_team_moves_the_version_and_reaches_its_keys(tmp_path: Path) -> None:
    load(tmp_path, config(teams=TEAMS))
    key = m.GatewayKey(name="k", team=m.Team.objects.get(name="interns"))
    key.set_new_secret()
    key.save()
    version = current_version()
    load(tmp_path, config(teams=[{**TEAMS[1], "rpm": 7, "budget_period": "day"}]))
    assert current_version() == version + 1
    spec = compile_table(current_version()).keys_by_hash[key.secret_hash]
    assert spec.team is not None
    assert (spec.team.limits.rpm, spec.team.limits.budget_period) == (7, "day")


@pytest.mark.parametrize(("entry", "expected"), [
    ({"name": "t", "rpm": 0}, "teams[0].rpm: must be at least 1, got 0"),
    ({"name": "t", "tpm": 2.5}, "teams[0].tpm: expected an integer, got 2.5"),
    ({"name": "t", "max_concurrency": "ten"}, "teams[0].max_concurrency: expected an integer, got 'ten'"),
    ({"name": "t", "budget_usd": -1}, "teams[0].budget_usd: must be at least 0, got -1"),
    ({"name": "t", "budget_usd": True}, "teams[0].budget_usd: expected a number, got True"),
    ({"name": "t", "budget_period": "year"}, "teams[0].budget_period: expected one of day, week, month, total"),
    ({"name": "t", "allowed_models": "gpt"}, "teams[0].allowed_models: expected a list of model names"),
    ({"name": "bad name!"}, "teams[0].name: 'bad name!' is not a valid name"),
    ({"name": "t", "budget": 5}, "teams[0].budget: unknown field"),
    ({"name": "t", "alert_webhook_url": "ftp://hooks.example.com/x"},
     "teams[0].alert_webhook_url: must be an http:// or https:// URL, got ftp://"),
    ({"name": "t", "alert_webhook_url": "hooks.example.com/x"},
     "teams[0].alert_webhook_url: must be an http:// or https:// URL, got no scheme"),
    ({"name": "t", "alert_webhook_url": "https://ops:pw@hooks.example.com/x"},
     "teams[0].alert_webhook_url: must not carry a user or password"),
    ({"name": "t", "alert_webhook_url": "https://hooks.example.com:99999/x"},
     "teams[0].alert_webhook_url: is not a valid URL"),
    ({"name": "t", "alert_webhook_url": 42}, "teams[0].alert_webhook_url: expected an http:// or https:// URL"),
])
def test_a_bad_team_is_refused_naming_the_field(entry: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(config(teams=[entry]))
    assert any(problem.startswith(expected) for problem in caught.value.problems), caught.value.problems


def test_a_refused_webhook_url_is_never_echoed() -> None:
    """A webhook URL's path may carry the receiver's token: the refusal names the field, not the URL."""
    with pytest.raises(ConfigError) as caught:
        parse_config(config(teams=[{"name": "t", "alert_webhook_url": "ftp://hooks.example.com/s3cr3t-token"}]))
    assert not any("s3cr3t-token" in problem for problem in caught.value.problems)


def test_a_team_listed_twice_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(config(teams=[{"name": "t"}, {"name": "t"}]))
    assert 'teams[1].name: "t" appears twice' in caught.value.problems


def test_teams_must_be_a_list_of_mappings() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(config(teams=["t"]))
    assert "teams[0]: expected a mapping" in caught.value.problems


def test_prune_deletes_unlisted_teams_but_not_one_a_key_belongs_to(tmp_path: Path) -> None:
    load(tmp_path, config(teams=TEAMS))
    key = m.GatewayKey(name="k", team=m.Team.objects.get(name="research"))
    key.set_new_secret()
    key.save()
    load(tmp_path, config(teams=[TEAMS[0]]), prune=True)
    assert sorted(m.Team.objects.values_list("name", flat=True)) == ["research"]
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, config(teams=[]), prune=True)
    assert 'teams: "research" is not in the file but gateway keys still belong to it' in caught.value.problems[0]
    assert m.Team.objects.filter(name="research").exists()  # nothing of the refused file was applied
