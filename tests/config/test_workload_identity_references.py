"""Workload identity tokens are never a provider key: ``${AWS_WEB_IDENTITY_TOKEN}`` is refused everywhere, and the
``NAME_FILE`` fallback never reads the file a reserved ``NAME_FILE`` names (the pod's identity token)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from routing import models as m
from routing.config.file.load import load_config_file
from routing.config.file.schema import ConfigError
from routing.config.provider_keys import look_up, reference_policy
from routing.config.runtime import compile_table

pytestmark = pytest.mark.django_db

TOKEN = "eyJ-the-pods-workload-identity-token-" + "7d2e91c4"
WORKLOAD_IDENTITY = ["AWS_WEB_IDENTITY_TOKEN", "AZURE_FEDERATED_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
                     "GOOGLE_APPLICATION_CREDENTIALS"]


@pytest.mark.parametrize("name", [*WORKLOAD_IDENTITY, *(f"{name}_FILE" for name in WORKLOAD_IDENTITY)])
def test_it_reserves_the_workload_identity_variables(name: str) -> None:
    assert reference_policy().reserved_by(name) is not None


@pytest.mark.parametrize("name", ["AWS_WEB_IDENTITY_TOKEN", "AZURE_FEDERATED_TOKEN",
                                  "AWS_CONTAINER_AUTHORIZATION_TOKEN"])
def test_the_fallback_never_reads_the_identity_token_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         name: str) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(f"{name}_FILE", str(token_file))
    found = look_up(f"${{{name}}}")
    assert found.value is None
    assert (found.problem or "").startswith(f"{name} is reserved")
    assert TOKEN not in (found.problem or "")


def test_a_stored_reference_to_the_identity_token_sends_no_key(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    monkeypatch.delenv("AWS_WEB_IDENTITY_TOKEN", raising=False)
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token_file))
    provider = m.Provider.objects.create(name="p", kind="openai", base_url="https://attacker.example/v1")
    m.ProviderKey.objects.create(provider=provider, reference="${AWS_WEB_IDENTITY_TOKEN}", position=0)
    m.ProviderModel.objects.create(provider=provider, upstream="m")
    compiled = compile_table(1).providers["p"]
    assert compiled.api_keys == ()
    assert "AWS_WEB_IDENTITY_TOKEN is reserved" in compiled.key_problems[0]
    assert TOKEN not in repr(compiled)


def test_the_config_file_refuses_the_identity_token_naming_the_field(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token_file))
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"providers": [{"name": "p", "kind": "openai", "base_url": "https://a.example/v1",
                                                   "api_key": "${AWS_WEB_IDENTITY_TOKEN}"}]}))
    with pytest.raises(ConfigError) as caught:
        load_config_file(str(path), author="test")
    assert caught.value.problems[0].startswith("providers[0].api_key: AWS_WEB_IDENTITY_TOKEN is reserved for")
    assert TOKEN not in str(caught.value)
    assert not m.Provider.objects.exists()


def test_the_admin_refuses_the_identity_token_naming_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    from django.contrib.auth.models import User
    from django.test import Client

    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/secrets/eks.amazonaws.com/serviceaccount/token")
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw-for-tests-only"))
    response = client.post("/admin/routing/provider/add/", {
        "name": "p", "kind": "openai", "base_url": "https://attacker.example/v1", "timeout_seconds": "600",
        "enabled": "on", "keys-TOTAL_FORMS": "1", "keys-INITIAL_FORMS": "0", "keys-MIN_NUM_FORMS": "0",
        "keys-MAX_NUM_FORMS": "1000", "keys-0-reference": "${AWS_WEB_IDENTITY_TOKEN}", "keys-0-position": "0",
    })
    assert response.status_code == 200  # the form again, with the refusal
    inline_errors = [str(e) for formset in response.context["inline_admin_formsets"]
                     for errors in formset.formset.errors for e in errors.get("reference", [])]
    assert any(e.startswith("AWS_WEB_IDENTITY_TOKEN is reserved for") for e in inline_errors), inline_errors
    assert not m.Provider.objects.exists()
