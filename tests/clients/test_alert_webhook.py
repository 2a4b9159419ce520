"""One budget alert post (routing.clients.alert_webhook): it takes the deployment's HTTP proxy as provider traffic
does, follows no redirect, and never shows the URL's path or query (which may carry the receiver's token)."""

from __future__ import annotations

import time

import pytest

from routing.clients.alert_webhook import PostResult, post_alert
from routing.clients.egress import egress
from routing.clients.http1.proxy import Proxy, ProxyEnvironment
from routing.core.budget_alerts import retryable, verify_signature
from tests.ops.webhook_receiver import webhook_receiver

SECRET = "a-webhook-secret-for-tests"
BODY = b'{"type":"budget.threshold_crossed"}'


def post(url: str) -> PostResult:
    return post_alert(url, BODY, secret=SECRET, alert_id="a1", now=time.time(), timeout_s=5)


def test_it_goes_through_the_environments_proxy_with_its_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    with webhook_receiver() as proxy:  # an HTTP proxy sees the request in absolute form
        port = int(proxy.url.split(":")[2].split("/")[0])
        environment = ProxyEnvironment(http=Proxy("127.0.0.1", port, authorization="Basic b3BzOnB3"))
        monkeypatch.setattr(egress, "_environment", environment)
        result = post("http://hooks.example.test/gomodel?token=t0k")
        [seen] = proxy.wait_for(1)
    assert result.delivered
    assert seen.path == "http://hooks.example.test/gomodel?token=t0k"
    assert seen.headers["proxy-authorization"] == "Basic b3BzOnB3"
    assert seen.body == BODY
    assert verify_signature(SECRET, seen.headers["x-gomodel-signature"], BODY, time.time())
    assert seen.headers["x-gomodel-alert-id"] == "a1"


def test_a_redirect_is_not_followed_and_not_retried() -> None:
    with webhook_receiver([302]) as receiver:
        result = post(receiver.url)
        assert len(receiver.wait_for(1)) == 1
    assert (result.status, result.delivered) == (302, False)
    assert not retryable(302)


def test_a_failure_names_the_origin_never_the_path() -> None:
    with webhook_receiver() as gone:
        url = gone.url + "?token=t0k"
    result = post(url)
    assert result.status is None
    assert result.error
    assert "t0k" not in result.error
    assert "/hooks" not in result.error


@pytest.mark.parametrize(("status", "again"), [(None, True), (500, True), (503, True), (429, True), (408, True),
                                               (400, False), (401, False), (404, False), (410, False)])
def test_what_is_retried(status: int | None, again: bool) -> None:
    assert retryable(status) is again
