"""The Node client libraries of the compatibility suite: installed once from tests/compat/node/package-lock.json,
run one scenario a process.

``npm ci`` runs when the lockfile (or package.json) changed since the last install, which a stamp in
node_modules/ records; otherwise the installed tree is used as it is. Some of the libraries need Node 22 or newer,
so the lockfile pins the ``node`` package, whose binary (node_modules/.bin/node) runs the scripts whatever Node
the machine has; only ``npm`` itself comes from the machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

NODE_DIR = Path(__file__).resolve().parent / "node"
MODULES = NODE_DIR / "node_modules"
STAMP = MODULES / ".compat-installed"
NODE = MODULES / ".bin" / "node"


def lock_digest() -> str:
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((NODE_DIR / name).read_bytes())
    return digest.hexdigest()


def ensure_installed() -> Path:
    """The pinned Node binary, after ``npm ci`` when the installed tree is not the lockfile's."""
    wanted = lock_digest()
    if STAMP.is_file() and STAMP.read_text() == wanted and NODE.exists():
        return NODE
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is needed to install the Node clients of tests/compat (Debian's npm package)")
    done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=NODE_DIR,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"npm ci failed in {NODE_DIR}:\n{done.stdout}\n{done.stderr}")
    STAMP.write_text(wanted)  # last: an interrupted install is installed again
    return NODE


def run_script(node: Path, script: str, settings: dict[str, Any]) -> dict[str, Any]:
    """Run ``script`` with ``settings`` as its COMPAT variable; the JSON outcome it printed."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"),
           "COMPAT": json.dumps(settings)}
    done = subprocess.run([str(node), script], cwd=NODE_DIR, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{script} exited with {done.returncode}:\n{done.stdout}\n{done.stderr}"
    lines = done.stdout.strip().splitlines()
    assert lines, f"{script} printed nothing:\n{done.stderr}"
    outcome: dict[str, Any] = json.loads(lines[-1])
    return outcome
