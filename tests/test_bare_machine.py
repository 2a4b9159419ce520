"""The pure parts of the suite run on a machine without PostgreSQL, Redis or RabbitMQ."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_without_services(*paths: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GOMODEL_TESTS_WITHOUT_SERVICES": "1", "DATABASE_URL": "postgres://nobody@127.0.0.1:9/none"}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *paths], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_it_runs_the_core_and_provider_tests_without_any_service() -> None:
    done = run_without_services("tests/core", "tests/providers")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout


def test_it_refuses_to_run_a_database_test_when_told_there_are_no_services() -> None:
    """The switch above really stops a run that needs a service (so the first test cannot pass vacuously)."""
    done = run_without_services("tests/api/test_ledger_inputs.py")
    assert done.returncode != 0
    assert "needs PostgreSQL, Redis or RabbitMQ" in done.stdout + done.stderr
