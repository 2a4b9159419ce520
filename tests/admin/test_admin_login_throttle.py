"""The admin's login (also the auditor pages' login) is throttled per user name and client address, and every
failure is recorded. Django's test client posts to the real login view through the full middleware stack."""

from __future__ import annotations

import datetime
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from axes.models import AccessAttempt, AccessFailureLog
from django.contrib.auth.models import User
from django.test import Client, RequestFactory
from django.utils import timezone

from gomodel_site.client_address import client_address

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
LOGIN = "/admin/login/"
PASSWORD = "correct-horse-battery-staple"
LIMIT = 5  # GOMODEL_ADMIN_LOGIN_FAILURES's default, which the tests' settings keep


@pytest.fixture(autouse=True)
def operator() -> User:
    return User.objects.create_superuser("operator", "op@example.com", PASSWORD)


def login(client: Client, password: str, *, user: str = "operator", peer: str = "127.0.0.1", **headers: Any) -> Any:
    return client.post(f"{LOGIN}?next=/admin/", {"username": user, "password": password}, REMOTE_ADDR=peer,
                       **headers)


def test_it_locks_a_user_and_address_out_after_the_documented_number_of_failures(client: Client) -> None:
    for _ in range(LIMIT - 1):
        refused = login(client, "wrong")
        assert refused.status_code == 200
        assert "Please enter the correct username and password" in refused.text
    locked = login(client, "wrong")
    assert locked.status_code == 429
    assert "Too many failed logins" in locked.text
    assert "15 minutes" in locked.text
    assert locked["Retry-After"] == "900"
    # Locked means locked: the right password changes nothing until the lockout ends.
    assert login(client, PASSWORD).status_code == 429
    assert "_auth_user_id" not in client.session


def test_it_records_every_failed_login(client: Client) -> None:
    login(client, "wrong")
    login(client, "also-wrong", user="nobody")
    failures = AccessFailureLog.objects.order_by("attempt_time")
    assert [(f.username, f.ip_address) for f in failures] == [("operator", "127.0.0.1"), ("nobody", "127.0.0.1")]
    attempt = AccessAttempt.objects.get(username="operator")
    assert attempt.failures_since_start == 1
    assert attempt.ip_address == "127.0.0.1"


def test_it_starts_counting_again_after_a_successful_login(client: Client) -> None:
    for _ in range(LIMIT - 1):
        login(client, "wrong")
    assert login(client, PASSWORD).status_code == 302
    client.logout()
    for _ in range(LIMIT - 1):
        assert login(client, "wrong").status_code == 200
    assert login(client, PASSWORD).status_code == 302


def test_it_locks_out_only_that_user_from_that_address(client: Client) -> None:
    User.objects.create_superuser("colleague", "c@example.com", PASSWORD)
    for _ in range(LIMIT):
        login(client, "wrong")
    assert login(client, PASSWORD).status_code == 429
    assert login(Client(), PASSWORD, peer="10.0.0.2").status_code == 302
    assert login(Client(), PASSWORD, user="colleague").status_code == 302


def test_it_counts_failures_against_the_tcp_peer_whatever_it_forwards(client: Client) -> None:
    for n in range(LIMIT):
        login(client, "wrong", HTTP_X_FORWARDED_FOR=f"198.51.100.{n}")
    assert login(client, PASSWORD, HTTP_X_FORWARDED_FOR="198.51.100.200").status_code == 429
    assert set(AccessFailureLog.objects.values_list("ip_address", flat=True)) == {"127.0.0.1"}


def test_it_lifts_the_lockout_once_it_has_lasted(client: Client) -> None:
    for _ in range(LIMIT):
        login(client, "wrong")
    assert login(client, PASSWORD).status_code == 429
    AccessAttempt.objects.update(attempt_time=timezone.now() - datetime.timedelta(minutes=15, seconds=1))
    assert login(client, PASSWORD).status_code == 302


def test_it_guards_the_auditor_pages_with_the_same_login(client: Client) -> None:
    assert client.get("/audit/")["Location"].startswith(LOGIN)
    for _ in range(LIMIT):
        login(client, "wrong")
    locked = client.post(f"{LOGIN}?next=/audit/", {"username": "operator", "password": PASSWORD})
    assert locked.status_code == 429


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [(0, "203.0.113.7", "127.0.0.1"),
     (1, "203.0.113.7", "203.0.113.7"),
     (1, "6.6.6.6, 203.0.113.7", "203.0.113.7"),  # the left entry came from the client: not believed
     (2, "6.6.6.6, 203.0.113.7, 10.0.0.5", "203.0.113.7"),
     (2, "203.0.113.7", "127.0.0.1")],  # fewer entries than proxies: not the chain they build
)
def test_it_believes_x_forwarded_for_only_as_far_as_the_trusted_proxies_go(settings: Any, proxies: int,
                                                                          forwarded: str, expected: str) -> None:
    settings.GOMODEL_TRUSTED_PROXIES = proxies
    request = RequestFactory().post(LOGIN, REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=forwarded)
    assert client_address(request) == expected


def manage_settings(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = "from django.conf import settings as s; print(s.AXES_FAILURE_LIMIT, s.AXES_COOLOFF_TIME)"
    env = {"PATH": "/usr/bin:/bin", "DJANGO_SECRET_KEY": "test-only-" + "x" * 40, **env}
    return subprocess.run([sys.executable, "manage.py", "shell", "--no-imports", "-c", code], cwd=ROOT,
                          capture_output=True, text=True, env=env)


def test_it_takes_the_limit_and_the_lockout_from_the_environment() -> None:
    done = manage_settings({"GOMODEL_ADMIN_LOGIN_FAILURES": "3", "GOMODEL_ADMIN_LOCKOUT": "2m"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3", "0:02:00"]
    default = manage_settings({})
    assert default.stdout.split() == ["5", "0:15:00"]


@pytest.mark.parametrize(("name", "value"), [("GOMODEL_ADMIN_LOGIN_FAILURES", "0"),
                                             ("GOMODEL_ADMIN_LOCKOUT", "soon"),
                                             ("GOMODEL_TRUSTED_PROXIES", "-1")])
def test_it_stops_start_up_on_a_bad_value_naming_the_variable(name: str, value: str) -> None:
    done = manage_settings({name: value})
    assert done.returncode != 0
    assert f"{name}:" in done.stderr
    assert "Traceback" not in done.stderr
