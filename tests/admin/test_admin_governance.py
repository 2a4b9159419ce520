"""Teams and key limits in the admin and in ``manage.py createkey``: refused values name their field (or flag),
a key's page shows its usage and remaining budget from the limit store, and everything compiles into the
routing table the request path reads."""

from __future__ import annotations

import asyncio
import io
from decimal import Decimal
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from routing import models as m
from routing.clients.limit_store import ProcessLimitStore
from routing.config.runtime import compile_table
from routing.config.versioning import current_version
from routing.gateway.state import state
from routing.models import hash_secret

pytestmark = pytest.mark.django_db



def form_errors(response: Any) -> dict[str, list[str]]:
    assert response.status_code == 200, "the form was accepted but should have been refused"
    return {k: list(v) for k, v in response.context["adminform"].form.errors.items()}


TEAM_FORM = {"name": "research", "rpm": "", "tpm": "", "max_concurrency": "",
             "budget_usd": "", "budget_period": "month"}
KEY_FORM = {"name": "ci", "team": "", "rpm": "", "tpm": "", "max_concurrency": "",
            "budget_usd": "", "budget_period": "month", "expires_at_0": "", "expires_at_1": ""}


@pytest.mark.parametrize(("field", "value", "words"), [
    ("rpm", "0", "greater than or equal to 1"),
    ("tpm", "-5", "greater than or equal to"),
    ("max_concurrency", "many", "whole number"),
    ("budget_usd", "-1", "greater than or equal to 0"),
    ("budget_period", "year", "not one of the available choices"),
    ("allowed_models", "gpt", 'Unknown model "gpt"'),
    ("alert_webhook_url", "ftp://hooks.example.com/x", "must be an http:// or https:// URL"),
    ("alert_webhook_url", "https://ops:pw@hooks.example.com/x", "must not carry a user or password"),
])
def test_the_team_form_names_the_field_of_a_bad_value(admin_client: Client, field: str, value: str,
                                                      words: str) -> None:
    response = admin_client.post("/admin/routing/team/add/", {**TEAM_FORM, field: value})
    errors = form_errors(response)
    assert list(errors) == [field]
    assert words in " ".join(errors[field])
    assert not m.Team.objects.exists()


def test_a_team_saved_in_the_admin_moves_the_version_and_reaches_the_table(admin_client: Client) -> None:
    m.TierRoute.objects.create(alias="normal", easy="a", hard="b")
    before = current_version()
    response = admin_client.post("/admin/routing/team/add/", {
        **TEAM_FORM, "rpm": "60", "budget_usd": "12.5", "budget_period": "week",
        "allowed_models": ["normal"]})
    assert response.status_code == 302
    assert current_version() == before + 1
    team = m.Team.objects.get(name="research")
    key = m.GatewayKey(name="member", team=team, rpm=5)
    key.set_new_secret()
    key.save()
    spec = compile_table(current_version()).keys_by_hash[key.secret_hash]
    assert spec.team is not None
    assert (spec.team.name, spec.team.limits.rpm, spec.team.limits.budget_usd) == ("research", 60, 12.5)
    assert spec.team.limits.budget_period == "week"
    assert [s.ident for s in spec.limit_scopes] == [f"key:{key.pk}", "team:research"]
    assert spec.allows("normal")
    assert not spec.allows("other")


def test_the_key_form_refuses_models_outside_its_team(admin_client: Client) -> None:
    m.VirtualModel.objects.create(source="a-model")
    m.VirtualModel.objects.create(source="b-model")
    team = m.Team.objects.create(name="narrow", allowed_models=["a-model"])
    response = admin_client.post("/admin/routing/gatewaykey/add/", {
        **KEY_FORM, "team": str(team.pk), "allowed_models": ["a-model", "b-model"]})
    errors = form_errors(response)
    assert list(errors) == ["allowed_models"]
    assert "b-model" in errors["allowed_models"][0]
    assert "narrow" in errors["allowed_models"][0]


def test_the_key_form_names_a_bad_limit(admin_client: Client) -> None:
    response = admin_client.post("/admin/routing/gatewaykey/add/", {**KEY_FORM, "rpm": "0"})
    assert list(form_errors(response)) == ["rpm"]


def test_the_key_page_shows_the_remaining_budget_of_this_process_without_redis(
        admin_client: Client, settings: Any) -> None:
    settings.REDIS_URL = ""
    state.renew()
    key = m.GatewayKey(name="spender", budget_usd=Decimal("2"), budget_period="day", rpm=10)
    key.set_new_secret()
    key.save()
    spec = compile_table(current_version()).keys_by_hash[key.secret_hash]
    store = state.limits
    assert isinstance(store, ProcessLimitStore)

    async def spend() -> None:
        admission = await store.admit(spec.limit_scopes, "r1")
        store.settle(admission, tokens=10, spend_nanos=750_000_000)

    asyncio.run(spend())
    page = admin_client.get(f"/admin/routing/gatewaykey/{key.pk}/change/").content.decode()
    assert "0.750000 of 2 USD spent this day (UTC)" in page
    assert "1.250000 USD free to reserve" in page
    assert "1 of 10 in the last 60 s" in page
    assert "this gateway process only" in page
    state.renew()


def test_the_key_page_reads_redis_when_it_is_configured(admin_client: Client, settings: Any) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:6379/2"
    settings.GOMODEL_LIMIT_KEY_PREFIX = f"gomodel:test:admin:{id(settings)}:"
    key = m.GatewayKey(name="shared", budget_usd=Decimal("1"), budget_period="total")
    key.set_new_secret()
    key.save()
    page = admin_client.get(f"/admin/routing/gatewaykey/{key.pk}/change/").content.decode()
    assert "Counted in Redis, shared by every gateway process" in page
    assert "0.000000 of 1 USD spent total" in page


def test_the_key_page_says_when_redis_is_away(admin_client: Client, settings: Any) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    key = m.GatewayKey(name="lonely", rpm=3)
    key.set_new_secret()
    key.save()
    page = admin_client.get(f"/admin/routing/gatewaykey/{key.pk}/change/").content.decode()
    assert "Redis is unreachable" in page


# -- manage.py createkey ---------------------------------------------------------------------------------------


def createkey(*args: str) -> str:
    out = io.StringIO()
    call_command("createkey", *args, stdout=out)
    return out.getvalue()


def test_createkey_stores_every_limit_and_prints_only_the_secret() -> None:
    m.Team.objects.create(name="squad")
    printed = createkey("ci", "--model", "normal", "--team", "squad", "--rpm", "30", "--tpm", "50000",
                        "--max-concurrency", "4", "--budget-usd", "12.50", "--budget-period", "week")
    secret = printed.strip()
    assert printed == secret + "\n"
    assert secret.startswith("gm-")
    key = m.GatewayKey.objects.get(name="ci")
    assert key.secret_hash == hash_secret(secret)
    assert (key.team.name if key.team else None, key.rpm, key.tpm, key.max_concurrency) == ("squad", 30, 50000, 4)
    assert (key.budget_usd, key.budget_period, key.allowed_models) == (Decimal("12.5"), "week", ["normal"])


def test_createkey_without_limits_makes_an_unlimited_key() -> None:
    createkey("plain")
    key = m.GatewayKey.objects.get(name="plain")
    assert (key.rpm, key.tpm, key.max_concurrency, key.budget_usd, key.team) == (None, None, None, None, None)


@pytest.mark.parametrize(("args", "words"), [
    (["--rpm", "0"], "--rpm must be a whole number of at least 1, got '0'"),
    (["--rpm", "3.5"], "--rpm must be a whole number"),
    (["--tpm", "lots"], "--tpm must be a whole number"),
    (["--max-concurrency", "-2"], "--max-concurrency must be a whole number"),
    (["--budget-usd", "ten"], "--budget-usd must be an amount in USD"),
    (["--budget-usd", "-1"], "--budget-usd must be 0 or more"),
    (["--budget-usd", "0.0000001"], "--budget-usd takes at most 6 decimals"),
    (["--budget-period", "year"], "--budget-period must be one of day, week, month, total"),
    (["--team", "nobody"], '--team: no team named "nobody"'),
])
def test_createkey_names_the_flag_of_a_bad_value(args: list[str], words: str) -> None:
    with pytest.raises(CommandError) as caught:
        createkey("bad", *args)
    assert words in str(caught.value)
    assert not m.GatewayKey.objects.filter(name="bad").exists()


def test_createkey_refuses_a_model_outside_the_team() -> None:
    m.Team.objects.create(name="narrow", allowed_models=["a-model"])
    with pytest.raises(CommandError, match=r"--model: Not allowed for the team narrow: b-model"):
        createkey("bad", "--team", "narrow", "--model", "b-model")
