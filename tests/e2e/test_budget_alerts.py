"""Budget alerts through running gateways: two gateway processes sharing PostgreSQL and Redis serve a key with a
budget (the openai SDK); its spend crosses 50% and then 80%, and a webhook receiver on loopback gets each alert
once, signed, after a first answer of 500; a team's alerts go to the team's own webhook. The audit trail and
``/metrics`` say the same.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import openai
import psycopg
import pytest
import yaml

from routing.simulator.server import SimulatorServer
from tests.e2e.conftest import SIM_KEY, fresh_database, gateway_config, manage
from tests.gateway_process import Gateway, run_gateway
from tests.ops.webhook_receiver import Receiver, webhook_receiver
from tests.services import drop_redis_keys

pytestmark = [pytest.mark.services, pytest.mark.slow]

REDIS_URL = "redis://127.0.0.1:6379/2"
SECRET = "e2e-alert-secret-0123456789"


@dataclass
class Setup:
    gateways: list[Gateway]
    database_url: str
    receiver: Receiver  # the global webhook
    team_receiver: Receiver  # the "ops" team's own
    secrets: dict[str, str]

    def client(self, name: str, replica: int) -> openai.OpenAI:
        return openai.OpenAI(api_key=self.secrets[name], base_url=f"{self.gateways[replica].base_url}/v1",
                             max_retries=0)

    def logs(self) -> str:
        return "\n".join(g.log()[-4000:] for g in self.gateways)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, simulator: SimulatorServer) -> Iterator[Setup]:
    tmp = Path(tmp_path_factory.mktemp("alerts"))
    prefix = f"gomodel:test:e2e-alerts:{uuid.uuid4().hex[:12]}:"
    with (webhook_receiver([500]) as receiver, webhook_receiver(path="/ops") as team_receiver,
          fresh_database("alerts") as url):
        config = gateway_config(simulator.base_url)
        config["teams"] = [{"name": "ops", "alert_webhook_url": team_receiver.url}]
        path = tmp / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        manage(url, "loadconfig", str(path), env={"E2E_SIM_KEY": SIM_KEY})
        secrets = {"probe": manage(url, "createkey", "probe").strip()}
        env = {"DATABASE_URL": url, "E2E_SIM_KEY": SIM_KEY, "GOMODEL_MASTER_KEY": "", "REDIS_URL": REDIS_URL,
               "GOMODEL_LIMIT_KEY_PREFIX": prefix, "CELERY_BROKER_URL": "",
               "GOMODEL_BUDGET_ALERT_WEBHOOK_URL": receiver.url, "GOMODEL_BUDGET_ALERT_SECRET": SECRET,
               "GOMODEL_BUDGET_ALERT_RETRY_BASE": "200ms"}
        with run_gateway(tmp, env) as one, run_gateway(tmp, env) as two:
            yield Setup([one, two], url, receiver, team_receiver, secrets)
    drop_redis_keys(REDIS_URL, prefix)


def chat(client: openai.OpenAI) -> openai.types.chat.ChatCompletion:
    return client.chat.completions.create(model="oa/oa-model", max_tokens=16,
                                          messages=[{"role": "user", "content": "hello"}])


def request_cost(setup: Setup) -> float:
    """What one such request costs (oa-model: 1 USD per million input tokens, 2 per million output)."""
    usage = chat(setup.client("probe", 0)).usage
    assert usage is not None
    return (usage.prompt_tokens * 1 + usage.completion_tokens * 2) / 1_000_000


def budgeted_key(setup: Setup, name: str, *flags: str) -> None:
    """Create a key while the gateways run, and wait until both serve it (the configuration reloads in 0.2 s)."""
    setup.secrets[name] = manage(setup.database_url, "createkey", name, *flags).strip()
    for replica in range(len(setup.gateways)):
        deadline = time.monotonic() + 20
        while True:
            answer = httpx2.get(f"{setup.gateways[replica].base_url}/v1/models", timeout=10,
                                headers={"Authorization": f"Bearer {setup.secrets[name]}"})
            if answer.status_code == 200:
                break
            assert time.monotonic() < deadline, setup.logs()
            time.sleep(0.1)


def verified(header: str, body: bytes) -> bool:
    fields = dict(part.split("=", 1) for part in header.split(","))
    expected = hmac.new(SECRET.encode(), fields["t"].encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, fields["v1"]) and abs(time.time() - int(fields["t"])) <= 300


def alerts_for(receiver: Receiver, name: str) -> list[dict[str, object]]:
    return [json.loads(p.body) for p in receiver.posts if json.loads(p.body)["scope"]["name"] == name]


def spend_until(setup: Setup, key: str, receiver: Receiver, scope: str, threshold: int, limit: int = 40) -> int:
    """Requests of ``key`` alternating between the two gateways until ``receiver`` has the alert of ``scope`` (a
    key's or team's name) for ``threshold``; how many were sent."""
    for sent in range(1, limit + 1):
        chat(setup.client(key, sent % 2))
        deadline = time.monotonic() + 2  # an alert is posted within moments of the answer that crossed
        while time.monotonic() < deadline:
            if any(a["threshold_percent"] == threshold for a in alerts_for(receiver, scope)):
                return sent
            time.sleep(0.05)
    raise AssertionError(f"no {threshold}% alert after {limit} requests:\n{setup.logs()}")


def test_spend_crossing_50_and_80_percent_alerts_each_once_across_two_gateways(setup: Setup) -> None:
    cost = request_cost(setup)
    budget = round(cost * 10, 6)  # ten such requests
    budgeted_key(setup, "spender", "--budget-usd", f"{budget:.6f}", "--budget-period", "day")
    spend_until(setup, "spender", setup.receiver, "spender", 50)
    spend_until(setup, "spender", setup.receiver, "spender", 80)
    posts = [p for p in setup.receiver.posts if json.loads(p.body)["scope"]["name"] == "spender"]
    alerts = [json.loads(p.body) for p in posts]
    # 50% once, twice posted (the receiver answered 500 first), then 80% once.
    assert [a["threshold_percent"] for a in alerts] == [50, 50, 80], setup.logs()
    assert alerts[0]["id"] == alerts[1]["id"] != alerts[2]["id"]
    assert all(verified(p.headers["x-gomodel-signature"], p.body) for p in posts)
    first = alerts[0]
    assert first["scope"] == {"kind": "key", "name": "spender", "team": None}
    assert first["budget_usd"] == pytest.approx(budget)
    assert first["budget_period"] == "day"
    assert float(first["spend_usd"]) >= budget * 0.5  # type: ignore[arg-type]
    assert SIM_KEY not in json.dumps(alerts)
    with psycopg.connect(setup.database_url.replace("postgres://", "postgresql://")) as conn:
        rows = conn.execute("SELECT threshold, delivery, attempts FROM audit_budgetalert WHERE scope_name = "
                            "'spender' ORDER BY threshold").fetchall()
    assert rows == [(50, "delivered", 2), (80, "delivered", 1)]
    counted = 0.0
    for gateway in setup.gateways:
        for line in httpx2.get(f"{gateway.base_url}/metrics", timeout=10).text.splitlines():
            if line.startswith("gomodel_budget_alerts_total{") and 'name="spender"' in line and '"50"' in line:
                counted += float(line.rsplit(" ", 1)[1])
    assert counted == 1.0  # one process claimed it, in Redis, for both


def test_a_team_budget_alerts_the_team_webhook(setup: Setup) -> None:
    cost = request_cost(setup)
    team_budget = round(cost * 4, 6)
    config = yaml.safe_load(manage(setup.database_url, "dumpconfig"))
    for team in config["teams"]:
        if team["name"] == "ops":
            team.update({"budget_usd": team_budget, "budget_period": "month"})
    path = Path(setup.gateways[0].log_path).with_name("with-team-budget.yaml")
    path.write_text(yaml.safe_dump(config))
    manage(setup.database_url, "loadconfig", str(path), env={"E2E_SIM_KEY": SIM_KEY})
    budgeted_key(setup, "ops-member", "--team", "ops")
    spend_until(setup, "ops-member", setup.team_receiver, "ops", 50)
    [post] = [p for p in setup.team_receiver.posts if json.loads(p.body)["threshold_percent"] == 50]
    assert post.path == "/ops"
    assert verified(post.headers["x-gomodel-signature"], post.body)
    assert json.loads(post.body)["scope"] == {"kind": "team", "name": "ops", "team": "ops"}
    assert alerts_for(setup.receiver, "ops") == []
