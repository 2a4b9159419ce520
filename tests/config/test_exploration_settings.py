"""PRO_ROUTING_EXPLORATION and PRO_ROUTING_COLD_START_OBSERVATIONS: environment defaults, admin overrides that
win, range checks in the admin and the config file, and a bad environment value that stops start-up naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client, override_settings

from routing import models as m
from routing.config.file.parse import parse_config
from routing.config.file.routing_settings import compile_settings
from routing.config.file.schema import ConfigError
from routing.core.selector import SelectorConfig
from routing.core.table import SettingsInForce
from tests.gateway_process import ROOT


def test_the_defaults_are_one_percent_and_five_observations() -> None:
    defaults = SettingsInForce()
    assert (defaults.exploration, defaults.cold_start_observations) == (0.01, 5)
    config = SelectorConfig.from_settings(defaults)
    assert (config.exploration, config.cold_start_observations) == (0.01, 5)


@override_settings(PRO_ROUTING_EXPLORATION=0.2, PRO_ROUTING_COLD_START_OBSERVATIONS=7)
def test_it_takes_the_environment_without_an_admin_value() -> None:
    compiled = compile_settings(m.RoutingSettings())
    assert (compiled.exploration, compiled.cold_start_observations) == (0.2, 7)


@override_settings(PRO_ROUTING_EXPLORATION=0.2, PRO_ROUTING_COLD_START_OBSERVATIONS=7)
def test_the_admin_value_wins_even_when_it_is_zero() -> None:
    compiled = compile_settings(m.RoutingSettings(exploration=0.0, cold_start_observations=0))
    assert (compiled.exploration, compiled.cold_start_observations) == (0.0, 0)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("exploration", "0.6", "between 0 and 0.5"),
        ("exploration", "-0.1", "between 0 and 0.5"),
        ("cold_start_observations", "1001", "between 0 and 1000"),
    ],
)
def test_the_admin_refuses_a_value_out_of_range(admin_client: Client, field: str, value: str, message: str) -> None:
    response = admin_client.post("/admin/routing/routingsettings/add/", {field: value, "routing_objective": ""})
    errors = response.context["adminform"].form.errors
    assert any(message in e for e in errors[field]), errors
    assert not m.RoutingSettings.objects.exists()


@pytest.mark.django_db
def test_the_admin_saves_both_values(admin_client: Client) -> None:
    admin_client.post("/admin/routing/routingsettings/add/",
                      {"exploration": "0.05", "cold_start_observations": "3", "routing_objective": ""})
    row = m.RoutingSettings.objects.get()
    assert (row.exploration, row.cold_start_observations) == (0.05, 3)
    compiled = compile_settings(row)
    assert (compiled.exploration, compiled.cold_start_observations) == (0.05, 3)


@pytest.mark.django_db
def test_the_config_file_carries_them_and_refuses_a_share_out_of_range() -> None:
    parsed = parse_config({"settings": {"exploration": 0.1, "cold_start_observations": 2}})
    assert parsed["settings"] == {"exploration": 0.1, "cold_start_observations": 2}
    with pytest.raises(ConfigError) as caught:
        parse_config({"settings": {"exploration": 0.9}})
    assert any(p.startswith("settings.exploration: The exploration share") for p in caught.value.problems)


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("PRO_ROUTING_EXPLORATION", "0.9", "PRO_ROUTING_EXPLORATION"),
        ("PRO_ROUTING_EXPLORATION", "lots", "PRO_ROUTING_EXPLORATION"),
        ("PRO_ROUTING_COLD_START_OBSERVATIONS", "-1", "PRO_ROUTING_COLD_START_OBSERVATIONS"),
        ("PRO_ROUTING_COLD_START_OBSERVATIONS", "2.5", "PRO_ROUTING_COLD_START_OBSERVATIONS"),
    ],
)
def test_a_bad_environment_value_stops_start_up_naming_the_variable(
    tmp_path: Path, variable: str, value: str, message: str
) -> None:
    env = {"PATH": os.environ["PATH"], "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3",
           "DJANGO_SECRET_KEY": "tests-only-secret-key-" + "0123456789abcdefghijklmnopqrstuvwxyz", variable: value}
    done = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0
    assert message in done.stderr
    assert "Traceback" not in done.stderr
