"""PRO_ROUTING_PROBE_INTERVAL and a provider's ``probe``: environment default, admin override, config file, and
refusals that name the variable or the field."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client, override_settings

from routing import models as m
from routing.config.file.apply import apply_config
from routing.config.file.dump import dump_config
from routing.config.file.parse import parse_config
from routing.config.file.routing_settings import compile_settings
from routing.config.file.schema import ConfigError
from routing.config.runtime import compile_table
from routing.core.table import SettingsInForce
from tests.gateway_process import ROOT


def test_the_default_interval_is_fifteen_seconds() -> None:
    assert SettingsInForce().probe_interval_s == 15.0


@override_settings(PRO_ROUTING_PROBE_INTERVAL=2.5)
def test_the_environment_is_the_default_and_the_admin_value_wins_even_when_zero() -> None:
    assert compile_settings(m.RoutingSettings()).probe_interval_s == 2.5
    assert compile_settings(m.RoutingSettings(probe_interval_seconds=0.0)).probe_interval_s == 0.0


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["0.05", "-1", "100000"])
def test_the_admin_refuses_an_interval_out_of_range(admin_client: Client, value: str) -> None:
    response = admin_client.post("/admin/routing/routingsettings/add/",
                                 {"probe_interval_seconds": value, "routing_objective": ""})
    errors = response.context["adminform"].form.errors
    assert any("probe interval" in e for e in errors["probe_interval_seconds"]), errors


@pytest.mark.django_db
def test_the_admin_refuses_a_models_probe_for_azure_next_to_the_field(admin_client: Client) -> None:
    response = admin_client.post("/admin/routing/provider/add/", {
        "name": "az", "kind": "azure_openai", "base_url": "https://x.openai.azure.com", "api_version": "2024-10-21",
        "timeout_seconds": "600", "probe": "models", "enabled": "on",
        "keys-TOTAL_FORMS": "0", "keys-INITIAL_FORMS": "0"})
    errors = response.context["adminform"].form.errors
    assert any("completion" in e for e in errors["probe"]), errors


@pytest.mark.django_db
def test_the_config_file_carries_the_probe_mode_and_the_interval_and_dumps_them_back() -> None:
    parsed = parse_config({
        "providers": [{"name": "oa", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "probe": "completion"},
                      {"name": "an", "kind": "anthropic", "base_url": "http://127.0.0.1:9", "probe": "off"}],
        "settings": {"probe_interval_seconds": 5},
    })
    apply_config(parsed, author="test")
    dumped = dump_config()
    assert {p["name"]: p.get("probe") for p in dumped["providers"]} == {"oa": "completion", "an": "off"}
    assert dumped["settings"]["probe_interval_seconds"] == 5
    table = compile_table(1)
    assert (table.providers["oa"].probe, table.settings.probe_interval_s) == ("completion", 5.0)


@pytest.mark.django_db
@pytest.mark.parametrize(("provider", "problem"), [
    ({"name": "az", "kind": "azure_openai", "base_url": "https://x.openai.azure.com", "api_version": "v",
      "probe": "models"}, "providers[0].probe: azure_openai has no models call"),
    ({"name": "oa", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "probe": "always"},
     "providers[0].probe: expected one of models, completion, off"),
])
def test_the_config_file_refuses_a_bad_probe_naming_the_field(provider: dict[str, str], problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"providers": [provider]})
    assert any(p.startswith(problem) for p in caught.value.problems), caught.value.problems


@pytest.mark.parametrize("value", ["often", "50ms", "-5s"])
def test_a_bad_interval_stops_start_up_naming_the_variable(tmp_path: Path, value: str) -> None:
    env = {"PATH": os.environ["PATH"], "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3",
           "DJANGO_SECRET_KEY": "tests-only-secret-key-" + "0123456789abcdefghijklmnopqrstuvwxyz",
           "PRO_ROUTING_PROBE_INTERVAL": value}
    done = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0
    assert "PRO_ROUTING_PROBE_INTERVAL" in done.stderr
    assert "Traceback" not in done.stderr
