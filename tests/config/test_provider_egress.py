"""A provider's proxy and TLS files through the config file and into the routing table the gateway runs on."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from routing import models as m
from routing.config.file.dump import dump_config
from routing.config.file.load import load_config_file
from routing.config.file.schema import ConfigError
from routing.config.runtime import compile_table
from routing.config.versioning import current_version

pytestmark = pytest.mark.django_db

PEM = Path(__file__).resolve().parents[1] / "clients" / "http1"
CERT, KEY = str(PEM / "localhost-cert.pem"), str(PEM / "localhost-key.pem")


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")


def config(**egress: str) -> dict[str, object]:
    return {"providers": [{"name": "internal", "kind": "openai", "base_url": "https://llm.internal.corp/v1",
                           "api_key": "${OPENAI_API_KEY}", **egress}],
            "models": [{"provider": "internal", "upstream": "m"}]}


def load(tmp_path: Path, data: dict[str, object]) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    load_config_file(str(path), author="test")


def test_egress_settings_are_applied_dumped_back_and_compiled(tmp_path: Path) -> None:
    egress = {"proxy": "http://egress.corp:3128", "ca_bundle": CERT, "client_cert": CERT, "client_key": KEY}
    load(tmp_path, config(**egress))
    provider = m.Provider.objects.get(name="internal")
    assert (provider.proxy, provider.ca_bundle, provider.client_cert, provider.client_key) == tuple(egress.values())
    assert dump_config()["providers"] == config(**egress)["providers"]
    spec = compile_table(current_version()).providers["internal"]
    assert (spec.proxy, spec.ca_bundle, spec.client_cert, spec.client_key) == tuple(egress.values())


def test_a_provider_without_egress_settings_dumps_none(tmp_path: Path) -> None:
    load(tmp_path, config(proxy="direct"))
    assert dump_config()["providers"][0]["proxy"] == "direct"
    load(tmp_path, config())
    assert "proxy" not in dump_config()["providers"][0]
    assert m.Provider.objects.get(name="internal").proxy == ""


@pytest.mark.parametrize(("egress", "field", "words"), [
    ({"proxy": "https://egress.corp:3128"}, "proxy", "https:// proxies are not supported"),
    ({"proxy": "http://user:pw@egress.corp:3128"}, "proxy", "a proxy with credentials belongs in"),
    ({"ca_bundle": "/nonexistent/ca.pem"}, "ca_bundle", "ca_bundle /nonexistent/ca.pem: No such file"),
    ({"client_key": KEY}, "client_key", "a client key needs its client_cert"),
    ({"client_cert": 42}, "client_cert", "expected a string, got int"),
])
def test_unusable_egress_settings_are_refused_naming_the_path(tmp_path: Path, egress: dict[str, object],
                                                              field: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, config(**egress))  # type: ignore[arg-type]
    assert any(problem.startswith(f"providers[0].{field}: ") and words in problem
               for problem in caught.value.problems), caught.value.problems
    assert "user:pw" not in " ".join(caught.value.problems)
    assert not m.Provider.objects.exists()
