"""The budget alert settings: a bad value stops start-up naming the variable (never echoing a URL, which may carry a
token), a webhook URL needs the secret it is signed with, and the defaults are 50, 80 and 100%."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gateway_process import ROOT

SECRET = "an-alert-secret-long-enough"


def check(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    full = {"PATH": os.environ["PATH"], "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3", "DJANGO_DEBUG": "true",
            **env}
    code = ("import django; django.setup(); from django.conf import settings; "
            "print(settings.GOMODEL_BUDGET_ALERT_THRESHOLDS, settings.GOMODEL_BUDGET_ALERT_RETRIES)")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**full, "DJANGO_SETTINGS_MODULE": "gomodel_site.settings"})


@pytest.mark.parametrize(("env", "words"), [
    ({"GOMODEL_BUDGET_ALERT_THRESHOLDS": "50,eighty"}, "GOMODEL_BUDGET_ALERT_THRESHOLDS: expected whole percentages"),
    ({"GOMODEL_BUDGET_ALERT_THRESHOLDS": "0,50"}, "GOMODEL_BUDGET_ALERT_THRESHOLDS: expected whole percentages"),
    ({"GOMODEL_BUDGET_ALERT_THRESHOLDS": "150"}, "GOMODEL_BUDGET_ALERT_THRESHOLDS: expected whole percentages"),
    ({"GOMODEL_BUDGET_ALERT_WEBHOOK_URL": "ftp://hooks.example.com/t0ken", "GOMODEL_BUDGET_ALERT_SECRET": SECRET},
     "GOMODEL_BUDGET_ALERT_WEBHOOK_URL must be an http:// or https:// URL"),
    ({"GOMODEL_BUDGET_ALERT_WEBHOOK_URL": "https://hooks.example.com/t0ken"},
     "GOMODEL_BUDGET_ALERT_SECRET: not set, and GOMODEL_BUDGET_ALERT_WEBHOOK_URL is"),
    ({"GOMODEL_BUDGET_ALERT_SECRET": "short"}, "GOMODEL_BUDGET_ALERT_SECRET: must be at least 16 characters"),
    ({"GOMODEL_BUDGET_ALERT_RETRIES": "-1"}, "GOMODEL_BUDGET_ALERT_RETRIES"),
    ({"GOMODEL_BUDGET_ALERT_RETRY_BASE": "soon"}, "GOMODEL_BUDGET_ALERT_RETRY_BASE: expected a duration"),
])
def test_a_bad_alert_setting_stops_start_up_naming_it(env: dict[str, str], words: str, tmp_path: Path) -> None:
    done = check(env, tmp_path)
    assert done.returncode != 0
    assert words in done.stderr
    assert "t0ken" not in done.stderr


def test_the_defaults_and_a_valid_configuration_start(tmp_path: Path) -> None:
    assert check({}, tmp_path).stdout.split() == ["(50,", "80,", "100)", "8"]
    secret_file = tmp_path / "alert-secret"
    secret_file.write_text(SECRET + "\n")
    done = check({"GOMODEL_BUDGET_ALERT_THRESHOLDS": "90, 75%,75", "GOMODEL_BUDGET_ALERT_SECRET_FILE": str(secret_file),
                  "GOMODEL_BUDGET_ALERT_WEBHOOK_URL": "https://hooks.example.com/gomodel"}, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["(75,", "90)", "8"]
    assert check({"GOMODEL_BUDGET_ALERT_THRESHOLDS": ""}, tmp_path).stdout.split() == ["()", "8"]  # alerts off
