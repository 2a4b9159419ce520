"""Standing rules of the code base, checked on every run."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN_IN_CORE = {"django", "rest_framework", "httpx", "httpx2", "prometheus_client", "celery", "redis",
                     "psycopg", "jsonschema", "yaml", "routing.models", "audit"}


def test_it_keeps_routing_core_free_of_io_frameworks() -> None:
    offenders = []
    for path in sorted((ROOT / "routing" / "core").glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                if any(name == f or name.startswith(f + ".") for f in FORBIDDEN_IN_CORE):
                    offenders.append(f"{path.name}: {name}")
                if name.startswith("routing.") and not name.startswith("routing.core"):
                    offenders.append(f"{path.name}: {name}")
    assert offenders == []


def test_it_is_ruff_clean() -> None:
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_routing_core_is_mypy_strict_clean() -> None:
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "routing/core"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
