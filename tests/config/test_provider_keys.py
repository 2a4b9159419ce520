"""Provider key references: the gateway's own settings are refused everywhere, NAME_FILE is read at compile time.

A staff user who may edit providers chooses both a key reference and the URL the key is sent to, so a
reference to ``${DJANGO_SECRET_KEY}`` would send that secret to them. The config file refuses it naming the
path, the routing table compiler refuses a stored row that names it (written before the rule, or past the
admin), and an attempt to such a provider fails without anything being sent. The admin's refusal is in
tests/admin/test_admin_validation.py.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx2
import pytest
import yaml
from django.test import override_settings

from routing import models as m
from routing.config.file.load import load_config_file
from routing.config.file.schema import ConfigError
from routing.config.provider_keys import reference_policy
from routing.config.runtime import compile_table
from routing.core.key_references import reference_variable
from routing.core.table import Secret
from tests.gateway_process import ROOT, run_gateway

pytestmark = pytest.mark.django_db

# What a reserved variable holds in these tests; it must never appear in a message, a log or a request.
SECRET_VALUE = "the-gateways-own-secret-" + "4f1c9a7e2b6d8053"
RESERVED = ["${DJANGO_SECRET_KEY}", "${DATABASE_URL}", "${GOMODEL_MASTER_KEY}", "os.environ/REDIS_URL",
            "${CELERY_BROKER_URL}", "${PGPASSWORD}", "${AUDIT_SPOOL_DIR}", "${https_proxy}", "${SMTP_PASSWORD}"]


def config_with_keys(tmp_path: Path, *references: str) -> str:
    path = tmp_path / "config.yaml"
    provider = {"name": "p", "kind": "openai", "base_url": "https://attacker.example/v1"}
    if len(references) == 1:
        provider["api_key"] = references[0]
    else:
        provider["api_keys"] = list(references)
    path.write_text(yaml.safe_dump({"providers": [provider]}))
    return str(path)


def stored_provider(*references: str, base_url: str = "http://127.0.0.1:9/v1") -> m.Provider:
    """A provider row with these key references, written through the ORM: no validation runs, as for a row
    written before the rule existed."""
    provider = m.Provider.objects.create(name="p", kind="openai", base_url=base_url)
    for position, reference in enumerate(references):
        m.ProviderKey.objects.create(provider=provider, reference=reference, position=position)
    m.ProviderModel.objects.create(provider=provider, upstream="m")
    return provider


# --------------------------------------------------------------------------------------------------------
# The config file (loadconfig, GOMODEL_CONFIG)
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("reference", RESERVED)
def test_it_refuses_a_reserved_reference_in_the_config_file_naming_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reference: str
) -> None:
    variable = reference_variable(reference)
    assert variable is not None
    monkeypatch.setenv(variable, SECRET_VALUE)  # set, so "not set" cannot be why it is refused
    with pytest.raises(ConfigError) as caught:
        load_config_file(config_with_keys(tmp_path, reference), author="test")
    assert caught.value.problems[0].startswith(f"providers[0].api_key: {variable} is reserved")
    assert SECRET_VALUE not in str(caught.value)
    assert not m.Provider.objects.exists()


def test_it_names_the_position_of_a_refused_reference_in_a_key_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
    with pytest.raises(ConfigError) as caught:
        load_config_file(config_with_keys(tmp_path, "${OPENAI_API_KEY}", "${GOMODEL_MASTER_KEY}"), author="test")
    assert caught.value.problems == [
        "providers[0].api_keys[1]: GOMODEL_MASTER_KEY is reserved for the gateway's own settings and "
        "infrastructure secrets, which are never sent to a provider; give the key a variable of its own, such as "
        "OPENAI_API_KEY"
    ]


def test_the_allow_list_narrows_references_in_the_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
    monkeypatch.setenv("GROQ_API_KEY", "gsk-test-groq")
    with override_settings(GOMODEL_PROVIDER_KEY_ENV_ALLOW=("OPENAI_*",)):
        with pytest.raises(ConfigError) as caught:
            load_config_file(config_with_keys(tmp_path, "${GROQ_API_KEY}"), author="test")
        assert caught.value.problems == [
            "providers[0].api_key: GROQ_API_KEY is not in GOMODEL_PROVIDER_KEY_ENV_ALLOW (OPENAI_*)"
        ]
        load_config_file(config_with_keys(tmp_path, "${OPENAI_API_KEY}"), author="test")
    assert list(m.ProviderKey.objects.values_list("reference", flat=True)) == ["${OPENAI_API_KEY}"]


def test_the_command_line_refuses_a_reserved_reference_without_a_traceback(tmp_path: Path) -> None:
    path = config_with_keys(tmp_path, "${DJANGO_SECRET_KEY}")
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path}/db.sqlite3", DJANGO_SECRET_KEY=SECRET_VALUE)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    done = subprocess.run([sys.executable, "manage.py", "loadconfig", path], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    assert done.returncode != 0
    assert "providers[0].api_key: DJANGO_SECRET_KEY is reserved" in done.stderr
    assert "Traceback" not in done.stderr
    assert SECRET_VALUE not in done.stdout + done.stderr


# --------------------------------------------------------------------------------------------------------
# The reserved list and the allow-list setting
# --------------------------------------------------------------------------------------------------------


def names_the_settings_module_reads() -> set[str]:
    """Every variable name gomodel_site/settings.py passes to an env helper or os.environ, read from its source."""
    tree = ast.parse((ROOT / "gomodel_site" / "settings.py").read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        first = node.args[0]
        func = ast.unparse(node.func)
        readers = func.startswith("env_") or func in {"_environ", "os.environ.get", "os.getenv"}
        if readers and isinstance(first, ast.Constant) and isinstance(first.value, str):
            names.add(first.value)
    return names


def test_it_reserves_every_variable_the_settings_module_reads() -> None:
    names = names_the_settings_module_reads()
    assert {"DJANGO_SECRET_KEY", "DATABASE_URL", "REDIS_URL", "PROMETHEUS_MULTIPROC_DIR"} <= names
    policy = reference_policy()
    assert [name for name in sorted(names) if policy.reserved_by(name) is None] == []
    # Read by settings, outside every reserved name space: reserved because settings read it, not by a list.
    assert policy.reserved_by("PROMETHEUS_MULTIPROC_DIR") == "PROMETHEUS_MULTIPROC_DIR"
    assert policy.reserved_by("DATABASE_URL_FILE") is not None


def test_it_leaves_provider_key_names_free() -> None:
    policy = reference_policy()
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY",
                 "GROQ_API_KEY", "DEEPSEEK_API_KEY", "OPENROUTER_API_KEY", "AWS_BEARER_TOKEN_BEDROCK",
                 "DEMO_PROVIDER_KEY"):
        assert policy.refusal(name) is None, name


def settings_value(expression: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, **env)
    return subprocess.run(
        [sys.executable, "-c", f"import gomodel_site.settings as s; print({expression})"],
        cwd=ROOT, env=full, capture_output=True, text=True,
    )


def test_the_allow_list_setting_reads_names_and_prefix_patterns() -> None:
    done = settings_value("s.GOMODEL_PROVIDER_KEY_ENV_ALLOW",
                          GOMODEL_PROVIDER_KEY_ENV_ALLOW="OPENAI_*, ANTHROPIC_API_KEY")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "('OPENAI_*', 'ANTHROPIC_API_KEY')"
    assert settings_value("s.GOMODEL_PROVIDER_KEY_ENV_ALLOW").stdout.strip() == "()"


def test_a_bad_allow_list_stops_start_up_naming_the_variable() -> None:
    done = settings_value("1", GOMODEL_PROVIDER_KEY_ENV_ALLOW="OPENAI-*")
    assert done.returncode != 0
    assert "GOMODEL_PROVIDER_KEY_ENV_ALLOW: 'OPENAI-*' is not a variable name or a prefix pattern" in done.stderr


# --------------------------------------------------------------------------------------------------------
# Compiling the routing table: every stored reference checked again, NAME_FILE read
# --------------------------------------------------------------------------------------------------------


def test_a_stored_reserved_reference_gives_no_key_and_says_why_without_the_value(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("DJANGO_SECRET_KEY", SECRET_VALUE)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
    stored_provider("${DJANGO_SECRET_KEY}", "${OPENAI_API_KEY}")
    with caplog.at_level(logging.WARNING, logger="gomodel.runtime"):
        provider = compile_table(1).providers["p"]
    assert provider.api_keys == (Secret("sk-test-openai"),)
    assert len(provider.key_problems) == 1
    assert provider.key_problems[0].startswith("key ${DJANGO_SECRET_KEY}: DJANGO_SECRET_KEY is reserved")
    assert "${DJANGO_SECRET_KEY}" in caplog.text
    assert SECRET_VALUE not in caplog.text + repr(provider)


def test_a_stored_raw_key_is_not_used_and_never_echoed(caplog: pytest.LogCaptureFixture) -> None:
    raw = "sk-" + "proj-" + "pastedbymistake0123456789"
    stored_provider(raw)
    with caplog.at_level(logging.WARNING, logger="gomodel.runtime"):
        provider = compile_table(1).providers["p"]
    assert provider.api_keys == ()
    assert provider.key_problems == ("key (not a reference): a stored key is not a reference such as "
                                     "${OPENAI_API_KEY}; it is not used",)
    assert raw not in caplog.text


def test_it_reads_a_key_from_name_file_when_the_variable_is_unset_and_again_on_reload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    secret_file = tmp_path / "openai_api_key"
    secret_file.write_text("sk-from-the-file\n")
    monkeypatch.setenv("OPENAI_API_KEY_FILE", str(secret_file))
    stored_provider("${OPENAI_API_KEY}")
    assert compile_table(1).providers["p"].api_keys == (Secret("sk-from-the-file"),)

    secret_file.write_text("  sk-rotated-in-the-file  \n")  # a rotated container secret
    assert compile_table(2).providers["p"].api_keys == (Secret("sk-rotated-in-the-file"),)

    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-variable")  # the variable, when set, comes first
    assert compile_table(3).providers["p"].api_keys == (Secret("sk-from-the-variable"),)


def test_an_unreadable_name_file_names_the_file_never_its_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    missing = tmp_path / "nowhere" / "key"
    monkeypatch.setenv("OPENAI_API_KEY_FILE", str(missing))
    stored_provider("${OPENAI_API_KEY}")
    provider = compile_table(1).providers["p"]
    assert provider.api_keys == ()
    assert provider.key_problems == (
        f"key ${{OPENAI_API_KEY}}: OPENAI_API_KEY_FILE: cannot read {str(missing)!r}: No such file or directory",
    )


def test_a_reserved_reference_is_refused_before_its_name_file_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret_file = tmp_path / "master"
    secret_file.write_text(SECRET_VALUE)
    monkeypatch.delenv("GOMODEL_MASTER_KEY", raising=False)
    monkeypatch.setenv("GOMODEL_MASTER_KEY_FILE", str(secret_file))
    stored_provider("${GOMODEL_MASTER_KEY}")
    provider = compile_table(1).providers["p"]
    assert provider.api_keys == ()
    assert "GOMODEL_MASTER_KEY is reserved" in provider.key_problems[0]


def test_the_config_file_accepts_a_key_given_as_name_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    secret_file = tmp_path / "openai_api_key"
    secret_file.write_text("sk-from-the-file")
    monkeypatch.setenv("OPENAI_API_KEY_FILE", str(secret_file))
    load_config_file(config_with_keys(tmp_path, "${OPENAI_API_KEY}"), author="test")
    monkeypatch.delenv("OPENAI_API_KEY_FILE")
    with pytest.raises(ConfigError) as caught:
        load_config_file(config_with_keys(tmp_path, "${OPENAI_API_KEY}"), author="test")
    assert caught.value.problems == [
        "providers[0].api_key: environment variable OPENAI_API_KEY is not set (nor OPENAI_API_KEY_FILE)"
    ]


# --------------------------------------------------------------------------------------------------------
# A request to a provider whose only key is refused: nothing is sent
# --------------------------------------------------------------------------------------------------------


class RecordingUpstream:
    """An HTTP server on loopback that records every request it receives (and answers a chat completion)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, str]] = []
        recorded = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                recorded.append(dict(self.headers.items()))
                body = json.dumps({"id": "x", "object": "chat.completion", "model": "m", "choices": []}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> RecordingUpstream:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recording_upstream() -> Iterator[RecordingUpstream]:
    with RecordingUpstream() as upstream:
        yield upstream


@pytest.mark.django_db(transaction=True)
@pytest.mark.services
def test_a_request_to_a_provider_whose_key_is_refused_sends_nothing(
    tmp_path: Path, recording_upstream: RecordingUpstream
) -> None:
    stored_provider("${DJANGO_SECRET_KEY}", base_url=recording_upstream.url)
    master = "gm-test-master-key-0123456789abcdef"
    env = {"DJANGO_SECRET_KEY": SECRET_VALUE, "GOMODEL_MASTER_KEY": master}
    with run_gateway(tmp_path, env) as gateway:
        response = httpx2.post(f"{gateway.base_url}/v1/chat/completions", timeout=10,
                               headers={"authorization": f"Bearer {master}"},
                               json={"model": "p/m", "messages": [{"role": "user", "content": "hi"}]})
        log = gateway.log()
    assert response.status_code == 502, response.text
    error = response.json()["error"]
    assert error["code"] == "key_unavailable"
    assert recording_upstream.requests == []
    assert "${DJANGO_SECRET_KEY}" in log
    assert "is reserved" in log
    assert SECRET_VALUE not in log + response.text
