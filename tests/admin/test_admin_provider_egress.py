"""A provider's proxy and TLS files in the admin: saved when usable, refused naming the field when not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from routing import models as m

pytestmark = pytest.mark.django_db

PEM = Path(__file__).resolve().parents[1] / "clients" / "http1"
CERT, KEY = str(PEM / "localhost-cert.pem"), str(PEM / "localhost-key.pem")



def provider_post(**egress: str) -> dict[str, Any]:
    return {
        "name": "internal", "kind": "openai", "base_url": "https://llm.internal.corp/v1", "timeout_seconds": "600",
        "enabled": "on", "keys-TOTAL_FORMS": "0", "keys-INITIAL_FORMS": "0", "keys-MIN_NUM_FORMS": "0",
        "keys-MAX_NUM_FORMS": "1000", **egress,
    }


def test_it_saves_a_provider_s_own_proxy_ca_bundle_and_client_certificate(admin_client: Client) -> None:
    form = admin_client.get("/admin/routing/provider/add/").content.decode()
    assert all(f'name="{field}"' in form for field in ("proxy", "ca_bundle", "client_cert", "client_key"))
    response = admin_client.post("/admin/routing/provider/add/", provider_post(
        proxy="http://egress.corp:3128", ca_bundle=CERT, client_cert=CERT, client_key=KEY))
    assert response.status_code == 302
    provider = m.Provider.objects.get(name="internal")
    assert (provider.proxy, provider.ca_bundle, provider.client_cert, provider.client_key) == (
        "http://egress.corp:3128", CERT, CERT, KEY)


@pytest.mark.parametrize(("egress", "field", "words"), [
    ({"proxy": "socks5://egress.corp:1080"}, "proxy", "socks5:// proxies are not supported"),
    ({"proxy": "http://user:secret@egress.corp:3128"}, "proxy", "belongs in HTTPS_PROXY"),
    ({"ca_bundle": "relative/ca.pem"}, "ca_bundle", "absolute path"),
    ({"ca_bundle": "/nonexistent/ca.pem"}, "ca_bundle", "No such file"),
    ({"ca_bundle": KEY}, "ca_bundle", "not usable PEM"),
    ({"client_key": KEY}, "client_key", "needs its client_cert"),
    ({"client_cert": CERT, "client_key": CERT}, "client_cert", "not usable PEM"),
])
def test_it_refuses_egress_settings_that_cannot_work(admin_client: Client, egress: dict[str, str], field: str,
                                                     words: str) -> None:
    response = admin_client.post("/admin/routing/provider/add/", provider_post(**egress))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert any(words in error for error in errors[field]), errors
    assert "secret" not in str(errors)
    assert not m.Provider.objects.exists()
