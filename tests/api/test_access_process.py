"""Access, seen from outside: a real gateway process under uvicorn, raw sockets and the environment.

A key revoked or deleted in the database reaches the running gateway through its hot reload and leaves it
closed; a 401 comes back while the client is still sending its body; ``GOMODEL_AUTH=open`` is logged as a
warning at start-up, and a bad value stops start-up naming the variable.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx2
import pytest

from routing import models as m
from tests.gateway_process import Gateway, run_gateway
from tests.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]

ROOT = Path(__file__).resolve().parents[2]


def config_version(gateway: Gateway) -> str:
    return str(httpx2.get(f"{gateway.base_url}/health/ready", timeout=5).json()["checks"]["config"])


def models_status(gateway: Gateway, secret: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    return httpx2.get(f"{gateway.base_url}/v1/models", headers=headers, timeout=5).status_code


def change_and_wait(gateway: Gateway, change: Callable[[], object]) -> None:
    """Apply a configuration change in the database and wait until the gateway has loaded it."""
    before = config_version(gateway)
    change()
    wait_for(lambda: config_version(gateway) != before, 10, "the new configuration version")


def new_key(name: str) -> tuple[m.GatewayKey, str]:
    key = m.GatewayKey(name=name)
    secret = key.set_new_secret()
    key.save()
    return key, secret


def change_and_wait_for_key(gateway: Gateway, name: str) -> tuple[m.GatewayKey, str]:
    created: list[tuple[m.GatewayKey, str]] = []
    change_and_wait(gateway, lambda: created.append(new_key(name)))
    return created[0]


def test_it_stays_closed_when_the_last_key_is_revoked_or_deleted(tmp_path: Path) -> None:
    first, first_secret = new_key("first")
    with run_gateway(tmp_path, {"GOMODEL_MASTER_KEY": ""}) as gateway:
        assert models_status(gateway, first_secret) == 200
        assert models_status(gateway) == 401

        def revoke() -> None:
            first.revoked = True
            first.save()

        change_and_wait(gateway, revoke)
        assert models_status(gateway, first_secret) == 401
        refused = httpx2.post(f"{gateway.base_url}/v1/chat/completions", json={"model": "x", "messages": []})
        assert refused.status_code == 401
        assert "no key configured" in refused.json()["error"]["message"]

        second, second_secret = change_and_wait_for_key(gateway, "second")
        assert models_status(gateway, second_secret) == 200
        change_and_wait(gateway, second.delete)
        assert models_status(gateway, second_secret) == 401
        assert models_status(gateway) == 401
    assert "NO GATEWAY KEY IS CONFIGURED" not in gateway.log()  # a key existed at start-up


def status_before_the_body(gateway: Gateway, path: str, extra_headers: str = "") -> bytes:
    """The status line the gateway answers while the client has sent only a byte of a 10 MB body."""
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as sock:
        sock.sendall((f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      f"Content-Length: 10000000\r\n{extra_headers}\r\n{{").encode())
        received = b""
        while b"\r\n" not in received:
            chunk = sock.recv(4096)  # a gateway that waits for the body times out here
            if not chunk:
                break
            received += chunk
    return received.split(b"\r\n", 1)[0]


def test_it_answers_an_unknown_caller_401_before_the_body_is_sent(tmp_path: Path) -> None:
    new_key("only")
    with run_gateway(tmp_path, {"GOMODEL_MASTER_KEY": ""}) as gateway:
        for path in ("/v1/chat/completions", "/v1/messages", "/v1/routing/explain", "/v1/ledger/claim"):
            assert status_before_the_body(gateway, path) == b"HTTP/1.1 401 Unauthorized", path
        wrong_key = "Authorization: Bearer gm-wrong\r\n"
        assert status_before_the_body(gateway, "/v1/chat/completions", wrong_key) == b"HTTP/1.1 401 Unauthorized"


def test_it_logs_open_mode_loudly_and_serves_only_direct_local_clients(tmp_path: Path) -> None:
    with run_gateway(tmp_path, {"GOMODEL_AUTH": "open", "GOMODEL_MASTER_KEY": ""}) as gateway:
        assert models_status(gateway) == 200
        assert models_status(gateway, "placeholder-the-sdk-insists-on") == 200
        relayed = httpx2.get(f"{gateway.base_url}/v1/models", headers={"X-Forwarded-For": "203.0.113.9"}, timeout=5)
        assert relayed.status_code == 401
        assert status_before_the_body(gateway, "/v1/chat/completions", "X-Real-IP: 127.0.0.1\r\n") == (
            b"HTTP/1.1 401 Unauthorized")
    warnings = [line for line in gateway.log().splitlines() if "GOMODEL_AUTH=open" in line]
    assert warnings
    assert " WARNING " in warnings[0]


def test_in_open_mode_an_answer_to_a_key_it_did_not_check_says_the_gateway_runs_open(tmp_path: Path) -> None:
    _, secret = new_key("checked")
    with run_gateway(tmp_path, {"GOMODEL_AUTH": "open", "GOMODEL_MASTER_KEY": ""}) as gateway:
        chat = {"model": "no-such-model", "messages": [{"role": "user", "content": "Hi"}]}
        for headers in ({"Authorization": "Bearer sk-meant-for-another-gateway"}, {"x-api-key": "wrong"}, {}):
            listed = httpx2.get(f"{gateway.base_url}/v1/models", headers=headers, timeout=5)
            assert listed.status_code == 200
            assert listed.headers["x-gomodel-auth"] == "open"
            relayed = httpx2.post(f"{gateway.base_url}/v1/chat/completions", json=chat, headers=headers, timeout=5)
            assert relayed.status_code == 404  # the view's own answer, after the caller was let through
            assert relayed.headers["x-gomodel-auth"] == "open"
        # A key the gateway knows is checked, and its answers say nothing of open mode.
        valid = {"Authorization": f"Bearer {secret}"}
        listed = httpx2.get(f"{gateway.base_url}/v1/models", headers=valid, timeout=5)
        relayed = httpx2.post(f"{gateway.base_url}/v1/chat/completions", json=chat, headers=valid, timeout=5)
        assert (listed.status_code, relayed.status_code) == (200, 404)
        assert "x-gomodel-auth" not in listed.headers
        assert "x-gomodel-auth" not in relayed.headers


def test_in_keys_mode_no_answer_carries_the_open_mode_header(tmp_path: Path) -> None:
    _, secret = new_key("keys-mode")
    with run_gateway(tmp_path, {"GOMODEL_MASTER_KEY": ""}) as gateway:
        listed = httpx2.get(f"{gateway.base_url}/v1/models", headers={"Authorization": f"Bearer {secret}"}, timeout=5)
        refused = httpx2.get(f"{gateway.base_url}/v1/models", headers={"Authorization": "Bearer wrong"}, timeout=5)
        assert (listed.status_code, refused.status_code) == (200, 401)
        assert "x-gomodel-auth" not in listed.headers
        assert "x-gomodel-auth" not in refused.headers


@pytest.mark.parametrize("value", ["maybe", "off", "none"])
def test_it_stops_start_up_on_a_bad_GOMODEL_AUTH_naming_the_variable(value: str) -> None:
    done = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "DJANGO_SECRET_KEY": "test-only-" + "x" * 40,
                               "GOMODEL_AUTH": value})
    assert done.returncode != 0
    assert f"GOMODEL_AUTH: expected one of keys, open, got '{value}'" in done.stderr
    assert "Traceback" not in done.stderr
