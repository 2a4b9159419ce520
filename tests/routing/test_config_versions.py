"""Configuration versions: one content is one version, whoever writes it, and key changes show in the history."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.db import connection, transaction

from audit.models import ConfigRevision
from routing import models as m
from routing.config import versioning
from routing.config.file import apply as apply_module
from routing.config.file.load import load_config_file

CONFIG = {
    "providers": [{"name": "openai", "kind": "openai", "base_url": "http://127.0.0.1:1/v1",
                   "api_key": "${OPENAI_API_KEY}"}],
    "models": [{"provider": "openai", "upstream": "gpt-4o-mini", "input_price": 0.15, "output_price": 0.6}],
    "virtual_models": [{"source": "fast", "strategy": "round_robin", "targets": [{"model": "openai/gpt-4o-mini"}]}],
}


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")


def write(tmp_path: Path, data: Mapping[str, Any]) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(dict(data)))
    return str(path)


@pytest.mark.django_db
def test_it_records_a_key_made_with_createkey_as_a_key_creation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    load_config_file(write(tmp_path, CONFIG), author="test")
    call_command("createkey", "ci-bot", "--rpm", "5", "--model", "fast")
    secret = capsys.readouterr().out.strip()
    revision = ConfigRevision.objects.order_by("-version").first()
    assert revision is not None
    assert revision.author == "createkey"
    assert revision.summary == "gateway_access: 1 added"
    assert revision.diff == '+ gateway_access[ci-bot]: {"models": ["fast"], "name": "ci-bot", "rpm": 5}'
    key = m.GatewayKey.objects.get(name="ci-bot")
    for text in (revision.diff, repr(revision.snapshot)):
        assert secret not in text
        assert key.secret_hash not in text
        assert key.prefix not in text


@pytest.mark.django_db
def test_it_records_a_revoked_key_as_a_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    call_command("createkey", "ci-bot")
    with transaction.atomic(), versioning.config_author("alice", source="admin"):
        key = m.GatewayKey.objects.get(name="ci-bot")
        key.revoked = True
        key.save()
        versioning.flush()
    revision = ConfigRevision.objects.order_by("-version").first()
    assert revision is not None
    assert revision.diff == "+ gateway_access[ci-bot].revoked: true"


@pytest.mark.django_db
def test_it_moves_no_version_when_a_save_changes_no_content(tmp_path: Path) -> None:
    first = load_config_file(write(tmp_path, CONFIG), author="test")
    with transaction.atomic(), versioning.config_author("alice", source="admin"):
        m.VirtualModel.objects.get(source="fast").save()  # saved as it was
        version = versioning.flush()
    assert version == first.version == versioning.current_version()
    assert list(ConfigRevision.objects.values_list("version", flat=True)) == [first.version]


@pytest.mark.django_db(transaction=True)
def test_it_writes_one_version_when_two_processes_apply_the_same_file_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The second process read the database before the first committed and writes after: one version still."""
    path = write(tmp_path, CONFIG)
    second_has_read = threading.Event()
    first_committed = threading.Event()
    original = apply_module._apply

    def apply_after_the_first(canonical: Any, before: Any, *, prune: bool) -> None:
        if threading.current_thread().name == "second":
            second_has_read.set()  # its "before" is the empty database
            assert first_committed.wait(30)
        original(canonical, before, prune=prune)

    monkeypatch.setattr(apply_module, "_apply", apply_after_the_first)
    results: dict[str, Any] = {}

    def start(name: str) -> None:
        try:
            if name == "first":
                assert second_has_read.wait(30)
            results[name] = load_config_file(path, author=f"GOMODEL_CONFIG:{path}")
        except Exception as exc:  # noqa: BLE001 - reported below, not lost in the thread
            results[name] = exc
        finally:
            if name == "first":
                first_committed.set()
            connection.close()

    threads = [threading.Thread(target=start, args=(name,), name=name) for name in ("first", "second")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not isinstance(results["first"], BaseException), results["first"]
    assert not isinstance(results["second"], BaseException), results["second"]
    assert results["first"].version == results["second"].version == versioning.current_version() == 1
    assert list(ConfigRevision.objects.values_list("version", flat=True)) == [1]
