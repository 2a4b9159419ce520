"""A configuration change reaches every worker process without a restart (each polls the version every
GOMODEL_CONFIG_POLL_SECONDS; how fast is a matter of that setting, not of this test's clock)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx2
import pytest

from routing import models as m
from routing.config.file.load import load_config_file
from tests.gateway_process import run_gateway

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def config_version(base_url: str) -> str:
    return httpx2.get(f"{base_url}/health/ready", timeout=2).json()["checks"]["config"]


def test_it_reaches_two_worker_processes_without_a_restart(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "providers: [{name: p, kind: openai, base_url: 'http://127.0.0.1:9/v1'}]\n"
        "models: [{provider: p, upstream: m1}]\n"
    )
    load_config_file(str(config), author="test")
    with run_gateway(tmp_path) as one, run_gateway(tmp_path) as two:
        before = config_version(one.base_url)
        assert config_version(two.base_url) == before

        m.ProviderModel.objects.create(provider=m.Provider.objects.get(name="p"), upstream="m2")
        give_up_at = time.monotonic() + 30  # a bound for a loaded machine, not a measurement
        seen: set[str] = set()
        while len(seen) < 2 and time.monotonic() < give_up_at:
            seen |= {g.base_url for g in (one, two) if config_version(g.base_url) != before}
            time.sleep(0.05)
        assert len(seen) == 2, f"only {sorted(seen)} reloaded"
        assert one.process.poll() is None
        assert two.process.poll() is None
