"""Production settings: no start without a secret key, `check --deploy` clean for the README's recipe, and HTTPS
for the admin that never redirects the API or the probes."""

from __future__ import annotations

import os
import re
import secrets
import shlex
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest

from tests.gateway_process import ROOT, run_gateway

BEHIND_A_TLS_PROXY = {
    "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
    "DJANGO_ALLOWED_HOSTS": "gateway.example.com",
    "DJANGO_HTTPS": "true",
    "DJANGO_SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto",
    "DJANGO_HSTS_PRELOAD": "true",
}


def manage(*args: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``manage.py ARGS`` in an environment holding only ``env`` (and what a shell always has)."""
    full = {"PATH": os.environ["PATH"], "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3", **env}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=full, capture_output=True, text=True,
                          timeout=120)


def test_production_refuses_to_start_without_a_secret_key_in_one_line(tmp_path: Path) -> None:
    done = manage("check", env={}, tmp_path=tmp_path)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "configuration error: DJANGO_SECRET_KEY: not set; production needs a long random value (python3 -c "
        "'import secrets; print(secrets.token_urlsafe(50))'), given directly or as DJANGO_SECRET_KEY_FILE"
    ]


def test_the_asgi_application_refuses_to_load_without_a_secret_key(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3"}
    done = subprocess.run([sys.executable, "-c", "import gomodel_site.asgi"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "ImproperlyConfigured: DJANGO_SECRET_KEY: not set" in done.stderr


def test_an_empty_secret_key_file_is_no_secret_key(tmp_path: Path) -> None:
    empty = tmp_path / "secret_key"
    empty.write_text("\n")
    done = manage("check", env={"DJANGO_SECRET_KEY_FILE": str(empty)}, tmp_path=tmp_path)
    assert done.returncode != 0
    assert "DJANGO_SECRET_KEY: not set" in done.stderr


@pytest.mark.parametrize("env", [{"GOMODEL_DEMO": "true"}, {"DJANGO_DEBUG": "true"},
                                 {"DJANGO_SECRET_KEY": secrets.token_urlsafe(50)}])
def test_the_demo_debug_and_a_configured_key_start(tmp_path: Path, env: dict[str, str]) -> None:
    done = manage("check", env=env, tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr


def test_manage_py_demo_runs_on_the_fallback_key(tmp_path: Path) -> None:
    done = manage("demo", "--help", env={}, tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "simulated providers" in done.stdout


def check_deploy(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return manage("check", "--deploy", "--fail-level", "WARNING", env=env, tmp_path=tmp_path)


def test_check_deploy_passes_behind_a_tls_proxy(tmp_path: Path) -> None:
    done = check_deploy(BEHIND_A_TLS_PROXY, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_check_deploy_warns_when_https_is_not_declared(tmp_path: Path) -> None:
    plain = {k: v for k, v in BEHIND_A_TLS_PROXY.items() if k not in ("DJANGO_HTTPS", "DJANGO_HSTS_PRELOAD")}
    done = check_deploy(plain, tmp_path)
    assert done.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in done.stdout + done.stderr


def readme_production_environment(tmp_path: Path) -> dict[str, str]:
    """The variables the README's production recipe exports; its ``...`` placeholders get random values."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Production set-up", 1)[1]
    recipe = re.search(r"```bash\n(.*?)```", section, re.S)
    assert recipe is not None, "the README's production set-up has no bash block"
    env: dict[str, str] = {}
    for line in recipe.group(1).splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] != ["export"]:
            continue
        for assignment in words[1:]:
            name, _, value = assignment.partition("=")
            env[name] = secrets.token_urlsafe(50) if value == "..." else value
    # The recipe's directory for the workers' metrics, made here as the operator would make it.
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics)
    return env


def test_check_deploy_passes_for_the_readme_production_recipe(tmp_path: Path) -> None:
    env = readme_production_environment(tmp_path)
    assert "DJANGO_SECRET_KEY" in env
    assert "DATABASE_URL" in env
    done = check_deploy(env, tmp_path)  # the recipe's database is not contacted: no check needs it
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


@pytest.mark.django_db(transaction=True)
@pytest.mark.services
def test_https_redirects_the_admin_but_never_the_api_or_the_probes(tmp_path: Path) -> None:
    master = "gm-test-master-key-0123456789abcdef"
    # The admin's pages name their stylesheets from the manifest collectstatic writes, as in production.
    static_root = str(tmp_path / "static")
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=ROOT, check=True,
                   env=dict(os.environ, DJANGO_SETTINGS_MODULE="gomodel_site.settings", DJANGO_STATIC_ROOT=static_root),
                   timeout=300)
    env = {**BEHIND_A_TLS_PROXY, "DJANGO_ALLOWED_HOSTS": "127.0.0.1,gateway.example.com", "GOMODEL_MASTER_KEY": master,
           "DJANGO_STATIC_ROOT": static_root}
    with run_gateway(tmp_path, env) as gateway, httpx2.Client(base_url=gateway.base_url, timeout=10) as client:
        # A load balancer's health check and a client on loopback, in plain HTTP: answered, not redirected.
        assert client.get("/health").status_code == 200
        assert client.get("/health/ready").status_code == 200
        assert client.get("/metrics").status_code == 200
        models = client.get("/v1/models", headers={"authorization": f"Bearer {master}"})
        assert models.status_code == 200, models.text
        completion = client.post("/v1/chat/completions", json={"model": "nope", "messages": []})
        assert completion.status_code == 401  # the API's own answer, not a redirect

        page = client.get("/admin/login/")
        assert page.status_code == 301
        assert page.headers["location"] == f"https://127.0.0.1:{gateway.port}/admin/login/"

        # Through the TLS-terminating proxy: served, with HSTS and secure-only cookies.
        page = client.get("/admin/login/", headers={"x-forwarded-proto": "https"})
        assert page.status_code == 200
        assert page.headers["strict-transport-security"] == "max-age=31536000; includeSubDomains; preload"
        cookie = page.headers["set-cookie"]
        assert "csrftoken=" in cookie
        assert "Secure" in cookie
