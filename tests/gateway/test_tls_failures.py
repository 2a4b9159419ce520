"""A provider whose certificate fails verification, end to end through the engine: the client hears
``tls_error`` with the verification message in its own envelope (never the host or a key), the attempt is
recorded as ``incompatible`` ``tls_error`` and not retried on the target, the target is locked out with the
reason in the live state, a fallback still answers, one WARNING names provider, host and verification, and a
trust store that names the certificate makes it work. The provider is the simulator behind a TLS forwarder
presenting a self-signed certificate.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from routing.core.health_config import HealthConfig
from routing.core.table import ModelSpec, ProviderSpec, RoutingTable, Secret, TargetRef, VirtualModelSpec
from routing.gateway.inspection import live_state
from routing.gateway.state import state
from routing.simulator import SimulatorServer
from tests.clients.http1.certificates import self_signed
from tests.clients.http1.egress_servers import Issued, TLSForwarder, server_context
from tests.gateway import support
from tests.gateway.support import answer, attempts_of, request, run

simulator, sim, fresh_state = support.simulator, support.sim, support.fresh_state

SECRET = "sk-tls-gateway-0123456789abcdefghijkl"
VERIFICATION = "certificate verify failed: self-signed certificate"


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return self_signed(tmp_path_factory.mktemp("tls-gateway"), "provider").cert


@pytest.fixture(scope="module")
def port(simulator: SimulatorServer, certificate: Path) -> Iterator[int]:
    """The port of ``https://localhost:PORT``: the simulator behind the self-signed certificate."""
    sim_url = urlsplit(simulator.base_url)
    key = certificate.with_suffix(".key")

    with TLSForwarder(server_context(Issued(certificate, key)), (sim_url.hostname or "127.0.0.1",
                                                                  sim_url.port or 80)) as forwarder:
        yield forwarder.port


def tls_table(simulator: SimulatorServer, port: int, **tls: str) -> RoutingTable:
    base = f"https://localhost:{port}"
    keys = (Secret(SECRET),)
    return RoutingTable.build(version=1, providers=[
        ProviderSpec("selfsigned", "openai", f"{base}/v1", api_keys=keys, **tls),  # type: ignore[arg-type]
        ProviderSpec("selfsigned-anthropic", "anthropic", base, api_keys=keys, **tls),  # type: ignore[arg-type]
        ProviderSpec("sim", "openai", f"{simulator.base_url}/v1"),
    ], models=[
        ModelSpec("untrusted", "selfsigned", "primary"),
        ModelSpec("untrusted-claude", "selfsigned-anthropic", "claude-sim"),
        ModelSpec("primary", "sim", "primary"),
    ], virtual_models=[
        VirtualModelSpec(source="tls-pair", strategy="failover",
                         targets=(TargetRef("untrusted"), TargetRef("primary"))),
    ])


@pytest.mark.parametrize("stream", [False, True])
def test_it_answers_tls_error_with_the_verification_message_and_does_not_retry_the_target(
        sim: SimulatorServer, port: int, audit_events: list[dict[str, Any]], stream: bool) -> None:
    reply = run(answer(request(tls_table(sim, port), "untrusted", stream=stream)))

    assert reply.status == 502
    assert reply.error["code"] == "tls_error"
    assert reply.error["message"] == f"TLS to the provider failed ({VERIFICATION}); 1 attempt made."
    assert b"localhost" not in reply.body  # the host is the log's
    assert str(port).encode() not in reply.body
    assert SECRET.encode() not in reply.body
    (event,) = audit_events
    assert attempts_of(event) == [("untrusted", "tls_error", "gave_up", "not_run")]  # once: no same-target retry
    assert event["attempts"][0]["error_class"] == "incompatible"
    assert sim.received() == []  # the handshake failed: nothing reached the provider


def test_the_anthropic_route_hears_it_in_anthropic_s_envelope(sim: SimulatorServer, port: int) -> None:
    reply = run(answer(request(tls_table(sim, port), "untrusted-claude", inbound="anthropic")))

    assert reply.status == 502
    body = reply.json()
    assert body["type"] == "error"
    assert VERIFICATION in body["error"]["message"]
    assert "localhost" not in body["error"]["message"]


def test_it_falls_back_and_locks_the_target_out_with_the_reason_in_the_live_state(
        sim: SimulatorServer, port: int, audit_events: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    routing = tls_table(sim, port)
    reply = run(answer(request(routing, "tls-pair")))

    assert reply.status == 200
    assert attempts_of(audit_events[0]) == [("untrusted", "tls_error", "fallback", "not_run"),
                                            ("primary", "ok", "accepted", "accepted")]
    health = state.health.get("untrusted")
    now = time.monotonic()
    assert health.status(now) == "cooling"
    assert health.last_error_reason == "tls_error"
    until = health.cooldown_until
    # Locked out for the maximum at once, as a refused key is: the certificate will not fix itself.
    assert until is not None
    assert until - now > HealthConfig().cooldown_max_s - 60
    monkeypatch.setattr(live_state, "current_table", lambda: routing)
    rows = {row["target"]: row for row in live_state.target_rows("tls-pair")}
    assert (rows["untrusted"]["status"], rows["untrusted"]["last_error"]) == ("cooling", "tls_error")

    run(answer(request(routing, "tls-pair")))  # the locked-out target is not tried again
    assert attempts_of(audit_events[1]) == [("primary", "ok", "accepted", "accepted")]


def test_it_logs_one_warning_naming_provider_host_and_verification_never_the_key(
        sim: SimulatorServer, port: int, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="gomodel.upstream"):
        run(answer(request(tls_table(sim, port), "untrusted")))

    lines = [r for r in caplog.records if r.name == "gomodel.upstream"]
    assert [(r.levelno, r.getMessage()) for r in lines] == [
        (logging.WARNING, f"provider selfsigned: TLS with localhost:{port} failed: {VERIFICATION}")]
    assert SECRET not in caplog.text


def test_a_ca_bundle_naming_the_certificate_makes_it_work(sim: SimulatorServer, port: int, certificate: Path) -> None:
    reply = run(answer(request(tls_table(sim, port, ca_bundle=str(certificate)), "untrusted")))
    assert reply.status == 200
    assert reply.json()["choices"][0]["message"]["content"]


def test_ssl_cert_file_naming_the_certificate_makes_it_work(sim: SimulatorServer, port: int, certificate: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate))  # read when the worker's pool makes its default context
    reply = run(answer(request(tls_table(sim, port), "untrusted-claude", inbound="anthropic")))
    assert reply.status == 200
    assert reply.json()["content"][0]["text"]
