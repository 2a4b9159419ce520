"""The reference phase's other gateways: their configuration as rendered, their pinned install files, the
loopback binding of Portkey's server, and the reason given when a registry cannot be reached."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from harness import reference_gateways as gateways

UPSTREAM = "http://127.0.0.1:18001"
# A loopback port nothing listens on: a registry that cannot be reached, refused at once.
DEAD_REGISTRY = "http://127.0.0.1:9/"


@pytest.mark.parametrize("upstream", [UPSTREAM, UPSTREAM + "/"])
def test_it_renders_a_tensorzero_config_that_points_at_the_upstream(upstream: str) -> None:
    config = tomllib.loads(gateways.tensorzero_config(upstream, model="instant", key_variable="BENCH_SIM_KEY"))

    assert config["gateway"] == {"observability": {"enabled": False}}
    assert config["models"] == {"instant": {
        "routing": ["sim"],
        "providers": {"sim": {"type": "openai", "model_name": "instant", "api_base": f"{UPSTREAM}/v1/",
                              "api_key_location": "env::BENCH_SIM_KEY"}},
    }}


def test_it_quotes_names_that_toml_would_misread() -> None:
    config = tomllib.loads(gateways.tensorzero_config(UPSTREAM, model='gpt-4.1 "mini"', key_variable="K"))

    assert config["models"]['gpt-4.1 "mini"']["providers"]["sim"]["model_name"] == 'gpt-4.1 "mini"'


def test_it_sends_portkey_to_the_upstream_with_the_key() -> None:
    assert gateways.portkey_headers(UPSTREAM + "/", api_key="sk-bench") == {
        "x-portkey-provider": "openai",
        "x-portkey-custom-host": f"{UPSTREAM}/v1",
        "Authorization": "Bearer sk-bench",
    }


def test_it_pins_portkey_and_the_node_adapter_that_streams() -> None:
    manifest = json.loads((gateways.PORTKEY_DIR / "package.json").read_text())
    lock = json.loads((gateways.PORTKEY_DIR / "package-lock.json").read_text())

    assert manifest["dependencies"] == {"@portkey-ai/gateway": gateways.PORTKEY_VERSION,
                                        "@hono/node-server": gateways.HONO_NODE_SERVER_VERSION}
    assert lock["packages"][""]["dependencies"] == manifest["dependencies"]
    assert lock["packages"]["node_modules/@portkey-ai/gateway"]["version"] == gateways.PORTKEY_VERSION
    # One copy of the adapter, the pinned one: the gateway's own range would otherwise take a newer one.
    adapters = {path: entry["version"] for path, entry in lock["packages"].items()
                if path.endswith("node_modules/@hono/node-server")}
    assert adapters == {"node_modules/@hono/node-server": gateways.HONO_NODE_SERVER_VERSION}
    assert not any("resolved" in entry for entry in lock["packages"].values())


def test_it_pins_tensorzero_and_every_dependency_exactly() -> None:
    lines = [ln for ln in gateways.TENSORZERO_REQUIREMENTS.read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]

    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+==[A-Za-z0-9_.]+", ln) for ln in lines), lines
    assert f"tensorzero=={gateways.TENSORZERO_VERSION}" in lines


@pytest.mark.parametrize("call", [
    "server.listen(0, undefined, report)",  # what @hono/node-server's serve() does without a hostname
    "server.listen(0, report)",
    "server.listen({port: 0}, report)",
])
def test_it_keeps_portkeys_server_on_loopback(call: str) -> None:
    script = ("const server = require('node:http').createServer();"
              "function report() { console.log(JSON.stringify(server.address())); server.close(); }" + call)

    done = subprocess.run(["node", "--require", str(gateways.LOOPBACK_PRELOAD), "-e", script], capture_output=True,
                          text=True, timeout=30, check=False)

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["address"] == "127.0.0.1"


def test_it_leaves_a_named_host_alone() -> None:
    script = ("const server = require('node:http').createServer();"
              "server.listen(0, '127.0.0.2', () => { console.log(server.address().address); server.close(); })")

    done = subprocess.run(["node", "--require", str(gateways.LOOPBACK_PRELOAD), "-e", script], capture_output=True,
                          text=True, timeout=30, check=False)

    assert done.stdout.strip() == "127.0.0.2", done.stderr


def _offline(tmp_path: Path) -> dict[str, str]:
    """The environment with every package source pointed at a port nothing listens on."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(("PIP_", "NPM_CONFIG_"))}
    env.update({"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": DEAD_REGISTRY + "simple/", "PIP_NO_CACHE_DIR": "1",
                "npm_config_registry": DEAD_REGISTRY, "npm_config_cache": str(tmp_path / "npm-cache"),
                "npm_config_offline": "false", "npm_config_prefer_offline": "false"})
    return env


def test_it_says_why_tensorzero_is_missing_when_pypi_cannot_be_reached(tmp_path: Path) -> None:
    messages: list[str] = []

    with pytest.raises(gateways.ReferenceUnavailable, match=r"pip install tensorzero==2026\.6\.0 failed .*: the "
                                                          r"package registry could not be reached; ERROR: "):
        gateways.tensorzero_python(tmp_path, env=_offline(tmp_path), progress=messages.append)

    assert "installing TensorZero 2026.6.0" in messages[0]
    assert not (tmp_path / "tensorzero-2026.6.0" / ".installed").exists()  # the next run tries again


def test_it_says_why_portkey_is_missing_when_npm_cannot_be_reached(tmp_path: Path) -> None:
    messages: list[str] = []

    with pytest.raises(gateways.ReferenceUnavailable, match=r"npm ci \(@portkey-ai/gateway@1\.15\.2\) failed .*: "
                                                          r"the package registry could not be reached; npm error "
                                                          r"code ECONNREFUSED"):
        gateways.portkey_folder(tmp_path, env=_offline(tmp_path), progress=messages.append)

    assert "installing Portkey's gateway 1.15.2" in messages[0]
    assert not (tmp_path / "portkey" / ".installed").exists()
