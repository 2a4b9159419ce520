"""Instructor's own virtual environment (var/compat/instructor), built from tests/compat/instructor/requirements.txt
when that file changed since the last build, which a stamp in the environment records."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

from tests.gateway_process import ROOT

HERE = Path(__file__).resolve().parent / "instructor"
REQUIREMENTS = HERE / "requirements.txt"
ENV = ROOT / "var" / "compat" / "instructor"
STAMP = ENV / ".compat-installed"
PYTHON = ENV / "bin" / "python"


def requirements_digest() -> str:
    return hashlib.sha256(REQUIREMENTS.read_bytes() + sys.version.encode()).hexdigest()


def ensure_environment() -> Path:
    """The environment's interpreter, after building it when it is not the requirements' (or is missing)."""
    wanted = requirements_digest()
    if STAMP.is_file() and STAMP.read_text() == wanted and PYTHON.exists():
        return PYTHON
    venv.EnvBuilder(clear=True, with_pip=True).create(ENV)
    done = subprocess.run([str(PYTHON), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"installing {REQUIREMENTS} failed:\n{done.stdout}\n{done.stderr}")
    STAMP.write_text(wanted)  # last: an interrupted build is built again
    return PYTHON


def run_instructor(python: Path, settings: dict[str, Any]) -> dict[str, Any]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"),
           "COMPAT": json.dumps(settings)}
    done = subprocess.run([str(python), str(HERE / "scenario.py")], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, f"the Instructor scenario exited with {done.returncode}:\n{done.stdout}\n{done.stderr}"
    outcome: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return outcome
