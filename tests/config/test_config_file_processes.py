"""GOMODEL_CONFIG applied by many gateway processes starting at the same moment: one configuration version.

Two gateways under the production server (granian, two workers each) start together on an empty database with
the same file, as replicas of a fresh deployment do; every one of the four processes applies the file at
start-up, and the history holds one version of it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
import yaml

from audit.models import ConfigRevision
from routing.config import versioning
from tests.gateway_process import ROOT, free_port
from tests.gateway_process import test_database_url as database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services, pytest.mark.slow]

CONFIG = {
    "providers": [{"name": "openai", "kind": "openai", "base_url": "http://127.0.0.1:1/v1",
                   "api_key": "${PROCESSES_TEST_KEY}"}],
    "models": [{"provider": "openai", "upstream": "gpt-4o-mini", "input_price": 0.15, "output_price": 0.6}],
    "virtual_models": [{"source": "fast", "strategy": "round_robin", "targets": [{"model": "openai/gpt-4o-mini"}]}],
}


def test_gateways_starting_at_once_with_the_same_file_write_one_version(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    env = {**os.environ, "DATABASE_URL": database_url(), "DJANGO_SETTINGS_MODULE": "gomodel_site.settings",
           "GOMODEL_CONFIG": str(path), "PROCESSES_TEST_KEY": "sk-test", "GOMODEL_MASTER_KEY": "",
           "CELERY_BROKER_URL": "", "GOMODEL_CONFIG_POLL_SECONDS": "0.2", "PYTHONUNBUFFERED": "1"}
    env.pop("GOMODEL_AUTH", None)
    ports = [free_port(), free_port()]
    processes = []
    for port in ports:  # both started before either is ready: their workers apply the file together
        log = open(tmp_path / f"gateway-{port}.log", "wb")  # noqa: SIM115 - closed with the process below
        processes.append((log, subprocess.Popen(
            [sys.executable, "-m", "granian", "--interface", "asgi", "--workers", "2", "--host", "127.0.0.1",
             "--port", str(port), "--log-level", "warning", "gomodel_site.asgi:application"],
            cwd=ROOT, env={**env, "AUDIT_SPOOL_DIR": str(tmp_path / f"spool-{port}")}, stdout=log,
            stderr=subprocess.STDOUT)))
    try:
        deadline = time.monotonic() + 90
        for port, (_, process) in zip(ports, processes, strict=True):
            while True:
                assert process.poll() is None, (tmp_path / f"gateway-{port}.log").read_text()
                try:
                    ready = httpx2.get(f"http://127.0.0.1:{port}/health/ready", timeout=2)
                    if ready.status_code == 200:
                        break
                except httpx2.HTTPError:
                    pass
                assert time.monotonic() < deadline, (tmp_path / f"gateway-{port}.log").read_text()
                time.sleep(0.1)
        applied = f"GOMODEL_CONFIG {path} applied: configuration version 1"
        loaded = "routing table version 1 loaded"

        def logs() -> str:
            return "".join((tmp_path / f"gateway-{port}.log").read_text() for port in ports)

        while logs().count(loaded) < 4 and time.monotonic() < deadline:  # a gateway is ready with one worker up
            time.sleep(0.1)
        # Every worker applied the file and serves version 1; a worker that found the content already there says
        # so instead of "applied", so one worker at least and maybe more wrote it.
        assert logs().count(loaded) >= 4, logs()  # a worker may load it again on a later poll
        assert 1 <= logs().count(applied) <= 4, logs()
        assert list(ConfigRevision.objects.values_list("version", flat=True)) == [1]
        assert versioning.current_version() == 1
        for port in ports:
            checks = httpx2.get(f"http://127.0.0.1:{port}/health/ready", timeout=5).json()["checks"]
            assert checks["config"] == "version 1"
    finally:
        for log, process in processes:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.close()
