"""The playground's server side: who may use it, its CSRF-protected tokens, and that a request sent with a key's
token is that key's request (its limits, its models, its audit rows), through the real /v1/chat/completions with
the simulator as upstream."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import time
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core import signing
from django.test import AsyncClient, Client
from django.utils import timezone

from audit.models import AttemptRecord, AuditRevision
from routing.api.gateway_auth import caller_from_scope
from routing.api.playground_token import TOKEN_TTL_S, mint_token
from routing.config.runtime import runtime
from routing.core.limits import Limits
from routing.core.table import KeySpec, RoutingTable, TeamSpec
from routing.gateway.gateway_error import GatewayError
from routing.models import hash_secret
from routing.simulator import SimulatorServer
from tests.gateway import support

simulator = support.simulator
sim = support.sim
fresh_state = support.fresh_state

pytestmark = pytest.mark.django_db

LIMITED = KeySpec(id=31, name="two-a-minute", secret_hash=hash_secret("gm-playground-limited-0123456789"),
                  allowed_models=frozenset({"primary", "normal"}), limits=Limits(rpm=2),
                  team=TeamSpec(name="research"))
OPEN_KEY = KeySpec(id=32, name="anything", secret_hash=hash_secret("gm-playground-open-0123456789"))
CHAT = {"model": "primary", "messages": [{"role": "user", "content": "hello from the playground"}]}


@pytest.fixture
def served(sim: SimulatorServer, settings: Any) -> RoutingTable:
    settings.GOMODEL_AUTH = "keys"
    base = support.routing_table(sim.base_url)
    table = dataclasses.replace(base, keys_by_hash={k.secret_hash: k for k in (LIMITED, OPEN_KEY)})
    runtime.swap(table)
    return table


@pytest.fixture
def root() -> User:
    return User.objects.create_superuser("root", "root@example.com", "pw-for-tests-only")


@pytest.fixture
def staff_client(root: User) -> Client:
    client = Client()
    client.force_login(root)
    return client


def chat(token: str, body: dict[str, Any] | None = None, path: str = "/v1/chat/completions") -> Any:
    """The gateway's answer to one request with ``token``, read to its end on a loop that closes the upstream
    connections it opened (as the API tests do)."""

    async def ask() -> Any:
        response = await AsyncClient().post(path, json.dumps(body or CHAT), content_type="application/json",
                                            headers={"Authorization": f"Bearer {token}"})
        if response.streaming:
            async for _ in response.streaming_content:
                pass
        return response

    return support.run(ask())


def token_for(client: Client, chosen: str) -> dict[str, Any]:
    response = client.post("/admin/playground/token/", {"as": chosen})
    assert response.status_code == 200, response.content
    return dict(response.json())


def test_a_visitor_who_is_not_staff_is_sent_to_the_login_page(served: RoutingTable) -> None:
    anonymous = Client()
    for path in ("/admin/playground/", "/admin/playground/decision/abc/"):
        response = anonymous.get(path)
        assert response.status_code == 302
        assert response["Location"].startswith("/admin/login/")
    assert anonymous.post("/admin/playground/token/", {"as": "staff"}).status_code == 302
    user = User.objects.create_user("plain", password="pw-for-tests-only")  # not staff
    client = Client()
    client.force_login(user)
    response = client.post("/admin/playground/token/", {"as": "staff"})
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_staff_without_the_key_permission_may_not_send(served: RoutingTable) -> None:
    auditor = User.objects.create_user("auditor", password="pw-for-tests-only", is_staff=True)
    auditor.groups.add(Group.objects.get(name="auditors"))
    client = Client()
    client.force_login(auditor)
    assert client.get("/admin/playground/").status_code == 403
    assert client.post("/admin/playground/token/", {"as": "staff"}).status_code == 403
    assert client.get("/admin/").status_code == 200
    assert b"/admin/playground/" not in client.get("/admin/").content  # the dashboard links it only to senders
    auditor.user_permissions.add(Permission.objects.get(codename="change_gatewaykey"))
    client.force_login(User.objects.get(pk=auditor.pk))
    assert client.get("/admin/playground/").status_code == 200
    assert b"/admin/playground/" in client.get("/admin/").content


def test_a_token_needs_the_csrf_token_of_the_session(served: RoutingTable, root: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(root)
    assert client.post("/admin/playground/token/", {"as": "staff"}).status_code == 403
    page = client.get("/admin/playground/")
    csrf = page.context["csrf_token"]
    response = client.post("/admin/playground/token/", {"as": "staff"}, HTTP_X_CSRFTOKEN=str(csrf))
    assert response.status_code == 200
    assert response.json()["token"].startswith("gmpg-")
    assert client.get("/admin/playground/token/").status_code == 405  # never issued on a GET


def test_the_page_offers_the_configured_names_and_keys_but_no_secret(staff_client: Client,
                                                                     served: RoutingTable) -> None:
    page = staff_client.get("/admin/playground/")
    assert page.status_code == 200
    groups = {g["kind"]: g["names"] for g in page.context["names"]}
    assert groups["tier"] == ["normal"]
    assert "pair" in groups["virtual"]
    assert "primary" in groups["model"]
    labels = [k["label"] for k in page.context["keys"]]
    assert labels == ["anything", "two-a-minute; team research; models: normal, primary; 2 rpm"]
    html = page.content.decode()
    assert LIMITED.secret_hash not in html
    assert 'src="/static/routing/playground.js"' in html


def test_a_keys_token_is_subject_to_the_keys_limits_models_and_audit(
        staff_client: Client, served: RoutingTable, audit_events: list[dict[str, Any]],
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="gomodel.playground"):
        issued = token_for(staff_client, str(LIMITED.id))
    assert "playground token issued to root as the gateway key two-a-minute (id 31)" in caplog.messages
    assert issued["caller"] == "two-a-minute"
    assert issued["expires_in"] == TOKEN_TTL_S
    refused_model = chat(issued["token"], {**CHAT, "model": "secondary"})
    assert refused_model.status_code == 403
    assert refused_model.json()["error"]["code"] == "model_not_allowed"
    first = chat(issued["token"])  # the refused request counted too, as any client's does
    assert first.status_code == 200, first.content
    assert first["x-ratelimit-limit-requests"] == "2"
    assert first["x-ratelimit-remaining-requests"] == "0"
    second = chat(issued["token"])
    assert second.status_code == 429
    assert second.json()["error"]["code"] == "rate_limit_exceeded"
    answered = [e for e in audit_events if e["status"] == 200]
    assert [(e["key_name"], e["key_id"], e["team"]) for e in answered] == [("two-a-minute", 31, "research")]
    assert {e["status"] for e in audit_events} == {200, 403, 429}  # every request audited under the key
    assert all(e["key_name"] == "two-a-minute" for e in audit_events)


def test_a_staff_token_is_a_master_caller_audited_under_the_user(
        staff_client: Client, served: RoutingTable, audit_events: list[dict[str, Any]]) -> None:
    issued = token_for(staff_client, "staff")
    assert issued["caller"] == "playground:root"
    for _ in range(3):  # no key limits
        assert chat(issued["token"], {**CHAT, "model": "secondary"}).status_code == 200
    assert {e["key_name"] for e in audit_events} == {"playground:root"}


def test_a_token_is_refused_on_any_other_endpoint(staff_client: Client, served: RoutingTable) -> None:
    token = token_for(staff_client, str(OPEN_KEY.id))["token"]
    for path in ("/v1/messages", "/v1/routing/explain", "/v1/ledger/claim"):
        response = chat(token, path=path)
        assert response.status_code == 401, path
        assert "only for POST /v1/chat/completions" in response.json()["error"]["message"]
    response = Client().get("/v1/models", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 401


def test_a_token_is_refused_once_expired_forged_or_its_key_revoked(staff_client: Client,
                                                                   served: RoutingTable) -> None:
    old = mint_token(key_id=OPEN_KEY.id, username="root", now=time.time() - TOKEN_TTL_S - 5)
    response = chat(old)
    assert response.status_code == 401
    assert "expired" in response.json()["error"]["message"]
    good = token_for(staff_client, str(OPEN_KEY.id))["token"]
    # A payload naming another key, signed with anything but the gateway's secret and salt, and a changed one.
    for forged in ("gmpg-" + signing.TimestampSigner(salt="other").sign_object({"k": LIMITED.id, "u": "x"}),
                   "gmpg-" + signing.TimestampSigner(key="not-the-secret", salt="gomodel.playground").sign_object(
                       {"k": LIMITED.id, "u": "x"}),
                   good[:-2] + ("AA" if not good.endswith("AA") else "BB")):
        response = chat(forged)
        assert response.status_code == 401
        assert response.json()["error"]["message"] == "Invalid playground token."
    assert chat(good).status_code == 200
    revoked = dataclasses.replace(OPEN_KEY, revoked=True)
    runtime.swap(dataclasses.replace(served, keys_by_hash={LIMITED.secret_hash: LIMITED,
                                                           revoked.secret_hash: revoked}))
    response = chat(good)
    assert response.status_code == 401
    assert "revoked or deleted" in response.json()["error"]["message"]
    refused = staff_client.post("/admin/playground/token/", {"as": str(OPEN_KEY.id)})
    assert refused.status_code == 400
    assert refused.json()["error"]["field"] == "as"


def test_it_refuses_a_caller_that_is_neither_staff_nor_a_key(staff_client: Client, served: RoutingTable) -> None:
    for chosen in ("", "master", "0", "9999"):
        response = staff_client.post("/admin/playground/token/", {"as": chosen})
        assert response.status_code == 400, chosen
        assert response.json()["error"]["message"].startswith("as: ")


def test_the_decision_is_read_back_from_the_audit(staff_client: Client, served: RoutingTable) -> None:
    assert staff_client.get("/admin/playground/decision/not-stored-yet/").json() == {"stored": False}
    revision = AuditRevision.objects.create(
        request_id="pg-decision-1", created_at=timezone.now() - dt.timedelta(seconds=1), key_name="two-a-minute",
        requested_model="normal", tier_alias="normal", tier="hard", tier_target="pair", score=5.0,
        virtual_model="pair", strategy="failover", target="secondary", status=200, cost_usd=0.0000123,
        policy="default", policy_chain="default", attempt_count=2, fell_back=True)
    AttemptRecord.objects.create(revision=revision, seq=1, target="primary", status=503, action="fallback",
                                 error_class="transient", latency_ms=3.0)
    AttemptRecord.objects.create(revision=revision, seq=2, target="secondary", status=200, action="accepted",
                                 latency_ms=4.0, cost_usd=0.0000123)
    data = staff_client.get("/admin/playground/decision/pg-decision-1/").json()
    assert data["stored"] is True
    decision = data["decision"]
    assert decision["tier"]["tier"] == "hard"
    assert decision["tier"]["score"] == 5.0
    assert decision["policy"] == {"name": "default", "chain": "default"}
    assert decision["target"] == "secondary"
    assert [(a["target"], a["outcome"]) for a in decision["attempts"]] == [("primary", "fell back"),
                                                                          ("secondary", "answered")]
    assert decision["cost"] == "$0.0000123"
    assert decision["revision_url"] == "/audit/requests/pg-decision-1/"


def test_a_refused_token_is_never_served_as_open_access(served: RoutingTable, settings: Any) -> None:
    """In open mode a local request without a valid key is served; one with a bad playground token is not."""
    settings.GOMODEL_AUTH = "open"
    expired = mint_token(key_id=None, username="root", now=time.time() - TOKEN_TTL_S - 5)
    response = chat(expired)
    assert response.status_code == 401
    assert "expired" in response.json()["error"]["message"]


def test_the_decision_needs_the_permission_to_view_audit_revisions(served: RoutingTable) -> None:
    operator = User.objects.create_user("operator", password="pw-for-tests-only", is_staff=True)
    operator.user_permissions.add(Permission.objects.get(codename="change_gatewaykey"))
    client = Client()
    client.force_login(operator)
    page = client.get("/admin/playground/")
    assert page.status_code == 200
    assert page.context["config"]["canViewAudit"] is False
    assert "needs the permission to view audit revisions" in page.content.decode()
    assert client.get("/admin/playground/decision/any-request/").status_code == 403


def test_the_asgi_handlers_read_a_token_below_the_mount_point(served: RoutingTable) -> None:
    """The relay handler authenticates from the ASGI scope, before any body: a token from any peer works there."""
    token = mint_token(key_id=OPEN_KEY.id, username="root")
    scope: dict[str, Any] = {"type": "http", "method": "POST", "path": "/gateway/v1/chat/completions",
                             "root_path": "/gateway", "client": ("10.1.2.3", 40000),
                             "headers": [(b"authorization", f"Bearer {token}".encode())]}
    assert caller_from_scope(scope, served).key == OPEN_KEY
    with pytest.raises(GatewayError) as refused:
        caller_from_scope({**scope, "path": "/gateway/v1/embeddings"}, served)
    assert refused.value.status == 401
