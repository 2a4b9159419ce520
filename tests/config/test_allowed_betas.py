"""A provider's ``allowed_betas``: read, applied and dumped by the config file, refused naming the field in the
file and in the admin, and compiled into the routing table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client

from routing import models as m
from routing.config.file.dump import dump_config
from routing.config.file.load import load_config_file
from routing.config.file.schema import ConfigError
from routing.config.runtime import compile_table

pytestmark = pytest.mark.django_db


def config(tmp_path: Path, **provider: Any) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"providers": [{"name": "claude", "kind": "anthropic",
                                                   "base_url": "https://api.anthropic.com", **provider}]}))
    return str(path)


def test_the_config_file_sets_the_allowed_betas_and_dumps_them_back(tmp_path: Path) -> None:
    load_config_file(config(tmp_path, allowed_betas=["prompt-caching-2024-07-31"]), author="test")
    assert m.Provider.objects.get(name="claude").allowed_betas == ["prompt-caching-2024-07-31"]
    assert compile_table(1).providers["claude"].allowed_betas == frozenset({"prompt-caching-2024-07-31"})
    assert dump_config()["providers"][0]["allowed_betas"] == ["prompt-caching-2024-07-31"]


def test_without_allowed_betas_none_is_compiled_or_dumped(tmp_path: Path) -> None:
    load_config_file(config(tmp_path), author="test")
    assert compile_table(1).providers["claude"].allowed_betas == frozenset()
    assert "allowed_betas" not in dump_config()["providers"][0]


@pytest.mark.parametrize(("value", "problem"), [
    ("prompt-caching-2024-07-31", 'expected a list of beta names such as ["prompt-caching-2024-07-31"]'),
    (["ok-2024-01-01", "not a beta"], "'not a beta' is not a beta name such as prompt-caching-2024-07-31"),
])
def test_the_config_file_refuses_bad_allowed_betas_naming_the_field(tmp_path: Path, value: Any,
                                                                     problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config_file(config(tmp_path, allowed_betas=value), author="test")
    assert caught.value.problems == [f"providers[0].allowed_betas: {problem}"]
    assert not m.Provider.objects.exists()


def test_the_admin_sets_and_refuses_allowed_betas_on_the_field() -> None:
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw-for-tests-only"))
    form = {"name": "claude", "kind": "anthropic", "base_url": "https://api.anthropic.com", "timeout_seconds": "600",
            "enabled": "on", "keys-TOTAL_FORMS": "0", "keys-INITIAL_FORMS": "0", "keys-MIN_NUM_FORMS": "0",
            "keys-MAX_NUM_FORMS": "1000"}
    refused = client.post("/admin/routing/provider/add/", {**form, "allowed_betas": '["two words"]'})
    assert refused.status_code == 200
    errors = refused.context["adminform"].form.errors["allowed_betas"]
    assert errors == ["'two words' is not a beta name such as prompt-caching-2024-07-31."]
    saved = client.post("/admin/routing/provider/add/", {**form, "allowed_betas": '["context-1m-2025-08-07"]'})
    assert saved.status_code == 302
    assert m.Provider.objects.get(name="claude").allowed_betas == ["context-1m-2025-08-07"]
