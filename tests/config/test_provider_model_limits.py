"""A model's provider rpm/tpm: in the config file (parsed, applied, dumped), the routing table and the revisions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from audit.models import ConfigRevision
from routing import models as m
from routing.config.file.dump import dump_config
from routing.config.file.load import load_config_file
from routing.config.file.schema import ConfigError
from routing.config.runtime import compile_table
from routing.config.versioning import current_version

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")


def config(**limits: Any) -> dict[str, Any]:
    return {
        "providers": [{"name": "openai", "kind": "openai", "base_url": "http://127.0.0.1:1/v1",
                       "api_key": "${OPENAI_API_KEY}"}],
        "models": [{"provider": "openai", "upstream": "gpt-4o-mini", "capabilities": ["text"], **limits},
                   {"provider": "openai", "upstream": "gpt-5", "capabilities": ["text"]}],
    }


def write(tmp_path: Path, data: object) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_rpm_and_tpm_round_trip_through_the_file_the_table_and_the_revision(tmp_path: Path) -> None:
    result = load_config_file(write(tmp_path, config(rpm=500, tpm=200_000)), author="test")

    row = m.ProviderModel.objects.get(name="openai/gpt-4o-mini")
    assert (row.rpm, row.tpm) == (500, 200_000)
    dumped = dump_config()
    [limited, plain] = dumped["models"]
    assert (limited["rpm"], limited["tpm"]) == (500, 200_000)
    assert "rpm" not in plain  # no limit: nothing written
    assert "tpm" not in plain
    assert not load_config_file(write(tmp_path, dumped), author="test").changed  # the dump loads back equal
    table = compile_table(result.version)
    assert (table.models["openai/gpt-4o-mini"].rpm, table.models["openai/gpt-4o-mini"].tpm) == (500, 200_000)
    assert table.models["openai/gpt-5"].rpm is None
    revision = ConfigRevision.objects.get(version=current_version())
    assert revision.snapshot["models"][0]["rpm"] == 500  # auditors see the limits in the version's snapshot


def test_changing_a_limit_is_a_new_version(tmp_path: Path) -> None:
    first = load_config_file(write(tmp_path, config(rpm=500)), author="test")
    second = load_config_file(write(tmp_path, config(rpm=600)), author="test")
    assert second.changed
    assert second.version > first.version
    assert m.ProviderModel.objects.get(name="openai/gpt-4o-mini").rpm == 600


@pytest.mark.parametrize(("limits", "expected"), [
    ({"rpm": 0}, "models[0].rpm: must be at least 1, got 0"),
    ({"tpm": -5}, "models[0].tpm: must be at least 1, got -5"),
    ({"rpm": 2.5}, "models[0].rpm: expected an integer, got 2.5"),
    ({"tpm": "lots"}, "models[0].tpm: expected an integer, got 'lots'"),
    ({"rpm": True}, "models[0].rpm: expected an integer, got True"),
])
def test_a_bad_limit_is_refused_naming_the_field(tmp_path: Path, limits: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config_file(write(tmp_path, config(**limits)), author="test")
    assert expected in refused.value.problems
    assert not m.ProviderModel.objects.exists()  # all or nothing
