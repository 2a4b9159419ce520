"""A configuration change reaches every worker process within 2 seconds, without a restart."""

from __future__ import annotations

import time
from pathlib import Path

import httpx2
import pytest

from routing import models as m
from routing.config.file import load_config_file
from tests.gateway_process import run_gateway

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def config_version(base_url: str) -> str:
    return httpx2.get(f"{base_url}/health/ready", timeout=2).json()["checks"]["config"]


def test_it_reaches_two_worker_processes_within_two_seconds(tmp_path: Path) -> None:
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
        changed_at = time.monotonic()
        seen: dict[str, float] = {}
        while len(seen) < 2 and time.monotonic() - changed_at < 5:
            for gateway in (one, two):
                if gateway.base_url not in seen and config_version(gateway.base_url) != before:
                    seen[gateway.base_url] = time.monotonic() - changed_at
            time.sleep(0.05)
        assert len(seen) == 2, f"only {list(seen)} reloaded"
        assert max(seen.values()) < 2.0, seen
