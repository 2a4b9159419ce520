"""Other gateways measured beside ours in the reference phase: TensorZero (Rust) and Portkey (Node).

Each is installed on first use into its own folder under ``var/bench-references/`` (git-ignored), from pinned
files committed in ``bench/references/``: TensorZero's PyPI wheel (``tensorzero``, whose native module embeds
its gateway) into a virtualenv of its own, so its dependencies never meet the project's; Portkey's npm package
(``@portkey-ai/gateway``, with ``@hono/node-server`` 1.13.5, the Node adapter version whose streams work) with
``npm ci`` from the committed ``package-lock.json``. A folder is reinstalled when its pinned file changes. When
an install or a start fails (no registry, no npm), the caller gets the reason and the run goes on without
that row.

Both listen on 127.0.0.1 only and relay to the same upstream as the bare relay rows: the simulator's
``instant`` model, through an OpenAI-kind provider, with the simulator's key.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness import services

REFERENCES_DIR = services.BENCH_DIR / "references"
CACHE_DIR = services.REPO / "var" / "bench-references"
TENSORZERO_REQUIREMENTS = REFERENCES_DIR / "tensorzero" / "requirements.txt"
PORTKEY_DIR = REFERENCES_DIR / "portkey"
LOOPBACK_PRELOAD = PORTKEY_DIR / "loopback.cjs"
TENSORZERO_LAUNCHER = services.BENCH_DIR / "harness" / "tensorzero_gateway.py"

TENSORZERO_VERSION = "2026.6.0"
PORTKEY_VERSION = "1.15.2"
HONO_NODE_SERVER_VERSION = "1.13.5"
# TensorZero's OpenAI-compatible endpoint names a configured model this way.
TENSORZERO_MODEL_PREFIX = "tensorzero::model_name::"
INSTALL_TIMEOUT_S = 600
# Fail fast when a registry cannot be reached rather than retrying for minutes.
PIP_NETWORK_ARGS = ("--timeout", "20", "--retries", "1")
NPM_NETWORK_ARGS = ("--fetch-timeout=20000", "--fetch-retries=1", "--fetch-retry-mintimeout=2000",
                    "--fetch-retry-maxtimeout=5000")


class ReferenceUnavailable(Exception):
    """A reference gateway could not be installed or started; the message says why, for the report."""


@dataclass
class Target:
    """How the load generator reaches one started reference: its URL, the body's model name, extra headers."""

    url: str
    model: str
    headers: dict[str, str] = field(default_factory=dict)


# -- configuration ----------------------------------------------------------------------------------


def tensorzero_config(upstream_url: str, *, model: str, key_variable: str) -> str:
    """TensorZero's ``tensorzero.toml``: one model relayed to ``upstream_url``'s OpenAI-compatible API.

    Observability is off: with it on, the gateway wants ClickHouse for its inference records, which the
    benchmark does not run (the report says so beside its rows)."""
    def q(text: str) -> str:  # a TOML basic string (JSON's escapes are TOML's for these characters)
        return json.dumps(text)

    return "\n".join([
        "[gateway.observability]",
        "enabled = false",
        "",
        f"[models.{q(model)}]",
        f"routing = [{q('sim')}]",
        "",
        f"[models.{q(model)}.providers.sim]",
        'type = "openai"',
        f"model_name = {q(model)}",
        f"api_base = {q(upstream_url.rstrip('/') + '/v1/')}",
        f"api_key_location = {q('env::' + key_variable)}",
        "",
    ])


def portkey_headers(upstream_url: str, *, api_key: str) -> dict[str, str]:
    """Portkey's gateway takes its routing from each request's headers: an OpenAI-kind provider at
    ``upstream_url`` (a custom host on loopback, which its default trusted hosts allow) with the key."""
    return {
        "x-portkey-provider": "openai",
        "x-portkey-custom-host": upstream_url.rstrip("/") + "/v1",
        "Authorization": f"Bearer {api_key}",
    }


# -- installation -----------------------------------------------------------------------------------


def _digest(*paths: Path) -> str:
    sha = hashlib.sha256()
    for path in paths:
        sha.update(path.read_bytes())
    return sha.hexdigest()


def _stamp_matches(folder: Path, digest: str) -> bool:
    stamp = folder / ".installed"
    return stamp.exists() and stamp.read_text().strip() == digest


def _run_install(argv: list[str], *, what: str, cwd: Path, env: Mapping[str, str] | None = None) -> None:
    try:
        completed = subprocess.run(argv, cwd=cwd, env=None if env is None else dict(env), capture_output=True,
                                   text=True, timeout=INSTALL_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise ReferenceUnavailable(f"{what} did not finish within {INSTALL_TIMEOUT_S}s") from exc
    if completed.returncode != 0:
        raise ReferenceUnavailable(f"{what} failed (exit {completed.returncode}): "
                                   + failure_summary(completed.stderr + "\n" + completed.stdout))


# pip's and npm's lines that name the failure, out of their tracebacks and advice.
_TELLING_LINE = re.compile(r"^(ERROR: |npm error (code |FetchError|notarget|\d{3} ))")
_UNREACHABLE = re.compile(r"Connection refused|NewConnectionError|Name or service not known|name resolution|"
                          r"ECONNREFUSED|ENOTFOUND|ETIMEDOUT|EAI_AGAIN|timed out", re.IGNORECASE)


def failure_summary(output: str) -> str:
    """What a failed pip or npm run says went wrong, in one line: its error lines (or its last lines), after
    "the package registry could not be reached" when that is why."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    telling = [ln for ln in lines if _TELLING_LINE.match(ln)][:3] or lines[-3:]
    summary = " | ".join(telling)[:400]
    if _UNREACHABLE.search(output):
        summary = "the package registry could not be reached; " + summary
    return summary


def tensorzero_python(cache_dir: Path = CACHE_DIR, *, env: Mapping[str, str] | None = None,
                      progress: Callable[[str], None] = print) -> Path:
    """The Python of TensorZero's own virtualenv, installed from the pinned requirements when missing."""
    folder = cache_dir / f"tensorzero-{TENSORZERO_VERSION}"
    python = folder / "bin" / "python"
    digest = _digest(TENSORZERO_REQUIREMENTS)
    if python.exists() and _stamp_matches(folder, digest):
        return python
    progress(f"  installing TensorZero {TENSORZERO_VERSION} (the `tensorzero` wheel, pinned in "
                   f"{TENSORZERO_REQUIREMENTS.relative_to(services.REPO)}) into {_shown(folder)} ...")
    started = time.monotonic()
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    _run_install([sys.executable, "-m", "venv", str(folder)], what="creating TensorZero's virtualenv",
                 cwd=services.REPO, env=env)
    _run_install([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *PIP_NETWORK_ARGS,
                  "-r", str(TENSORZERO_REQUIREMENTS)],
                 what=f"pip install tensorzero=={TENSORZERO_VERSION}", cwd=services.REPO, env=env)
    _run_install([str(python), "-c", "import tensorzero"], what="importing the installed tensorzero",
                 cwd=services.REPO, env=env)
    (folder / ".installed").write_text(digest + "\n")
    progress(f"  installed in {time.monotonic() - started:.0f}s")
    return python


def portkey_folder(cache_dir: Path = CACHE_DIR, *, env: Mapping[str, str] | None = None,
                   progress: Callable[[str], None] = print) -> Path:
    """The folder holding Portkey's ``node_modules``, installed with ``npm ci`` from the committed lock file."""
    folder = cache_dir / "portkey"
    manifest, lock = PORTKEY_DIR / "package.json", PORTKEY_DIR / "package-lock.json"
    digest = _digest(manifest, lock)
    if (folder / "node_modules").is_dir() and _stamp_matches(folder, digest):
        return folder
    npm = shutil.which("npm", path=(env or os.environ).get("PATH"))
    if npm is None or shutil.which("node", path=(env or os.environ).get("PATH")) is None:
        raise ReferenceUnavailable("Node.js and npm are not installed (apt-get install -y nodejs npm)")
    progress(f"  installing Portkey's gateway {PORTKEY_VERSION} with @hono/node-server "
                   f"{HONO_NODE_SERVER_VERSION} (npm ci, {_shown(lock)}) into {_shown(folder)} ...")
    started = time.monotonic()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".installed").unlink(missing_ok=True)
    shutil.copyfile(manifest, folder / "package.json")
    shutil.copyfile(lock, folder / "package-lock.json")
    # --ignore-scripts: the only install script is the gateway's own patch-package, which has no patches in
    # the published package; skipping it keeps the install the same whichever npm runs it.
    _run_install([npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error",
                  *NPM_NETWORK_ARGS], what=f"npm ci (@portkey-ai/gateway@{PORTKEY_VERSION})", cwd=folder, env=env)
    (folder / ".installed").write_text(digest + "\n")
    progress(f"  installed in {time.monotonic() - started:.0f}s")
    return folder


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(services.REPO))
    except ValueError:
        return str(path)


# -- starting ---------------------------------------------------------------------------------------


def start_tensorzero(python: Path, upstream_url: str, env: Mapping[str, str], *, work_dir: Path,
                     key_variable: str, model: str) -> tuple[services.Service, Target]:
    """TensorZero's gateway, embedded in a Python process (its native module runs it on Tokio threads)."""
    config = work_dir / "tensorzero.toml"
    config.write_text(tensorzero_config(upstream_url, model=model, key_variable=key_variable))
    address_file = work_dir / "tensorzero.url"
    address_file.unlink(missing_ok=True)
    service = services.Service("tensorzero", [str(python), str(TENSORZERO_LAUNCHER), str(config),
                                              str(address_file)], env=env, log_dir=work_dir)
    base_url = _wait_for_file(service, address_file, timeout=60.0)
    return service, Target(url=f"{base_url}/chat/completions", model=TENSORZERO_MODEL_PREFIX + model)


def start_portkey(folder: Path, upstream_url: str, env: Mapping[str, str], *, work_dir: Path,
                  api_key: str, model: str) -> tuple[services.Service, Target]:
    """Portkey's gateway under Node, one process, as its ``start-server.js`` runs it, bound to loopback."""
    node = shutil.which("node", path=env.get("PATH"))
    if node is None:
        raise ReferenceUnavailable("Node.js is not installed (apt-get install -y nodejs npm)")
    port = services.free_port()
    script = folder / "node_modules" / "@portkey-ai" / "gateway" / "build" / "start-server.js"
    # NODE_ENV=production and --headless: no log console page (its routes and its log stream).
    service = services.Service("portkey", [node, "--require", str(LOOPBACK_PRELOAD), str(script), f"--port={port}",
                                           "--headless"], env={**env, "NODE_ENV": "production"}, log_dir=work_dir)
    try:
        service.wait_until(f"http://127.0.0.1:{port}/", timeout=60.0)
    except RuntimeError as exc:
        service.stop()
        raise ReferenceUnavailable(str(exc)) from exc
    return service, Target(url=f"http://127.0.0.1:{port}/v1/chat/completions", model=model,
                           headers=portkey_headers(upstream_url, api_key=api_key))


def _wait_for_file(service: services.Service, path: Path, *, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if service.process.poll() is not None:
            service.stop()
            raise ReferenceUnavailable(f"{service.name} exited with {service.process.returncode}: "
                                       f"{service.log_tail(8)}")
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.2)
    service.stop()
    raise ReferenceUnavailable(f"{service.name} did not start within {timeout:.0f}s: {service.log_tail(8)}")
