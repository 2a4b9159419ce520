"""Budget alerts with a broker: the gateway publishes the alert and the Celery worker records and posts it, retrying
after a 500 from the broker's schedule. A real RabbitMQ virtual host, a real worker, a real gateway process."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import psycopg
import pytest
import yaml

from routing.simulator.server import SimulatorServer
from tests.audit.procs import RabbitVhost, Worker, process_env
from tests.e2e.conftest import SIM_KEY, fresh_database, gateway_config, manage
from tests.e2e.test_budget_alerts import verified
from tests.gateway_process import run_gateway
from tests.ops.webhook_receiver import Received, webhook_receiver

pytestmark = [pytest.mark.services, pytest.mark.slow]

SECRET = "e2e-alert-secret-0123456789"


@pytest.fixture
def vhost() -> Iterator[RabbitVhost]:
    found = RabbitVhost()
    found.create()
    try:
        yield found
    finally:
        found.delete()


def at_threshold(posts: list[Received], percent: int) -> list[Received]:
    return [p for p in posts if json.loads(p.body)["threshold_percent"] == percent]


def test_the_worker_posts_the_alert_the_gateway_published(tmp_path: Path, simulator: SimulatorServer,
                                                          vhost: RabbitVhost) -> None:
    with webhook_receiver([500]) as receiver, fresh_database("alerts_celery") as url:
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump(gateway_config(simulator.base_url)))
        manage(url, "loadconfig", str(path), env={"E2E_SIM_KEY": SIM_KEY})
        secret = manage(url, "createkey", "spender", "--budget-usd", "0.000010", "--budget-period", "day").strip()
        alerts = {"GOMODEL_BUDGET_ALERT_WEBHOOK_URL": receiver.url, "GOMODEL_BUDGET_ALERT_SECRET": SECRET,
                  "GOMODEL_BUDGET_ALERT_RETRY_BASE": "200ms",
                  "GOMODEL_BUDGET_ALERT_THRESHOLDS": "50", "CELERY_BROKER_URL": vhost.url, "DATABASE_URL": url}
        worker = Worker(process_env(DJANGO_SETTINGS_MODULE="gomodel_site.settings", **alerts), tmp_path / "worker.log")
        worker.start()
        try:
            env = {"E2E_SIM_KEY": SIM_KEY, "GOMODEL_MASTER_KEY": "", "REDIS_URL": "", **alerts}
            with run_gateway(tmp_path, env) as gateway:
                client = openai.OpenAI(api_key=secret, base_url=f"{gateway.base_url}/v1", max_retries=0)
                # One answer costs more than 5 of the 10 micro-dollars (and fits the reservation): past 50% at once.
                # 50% is the only threshold, so no other alert can take the receiver's 500 or come between the posts.
                client.chat.completions.create(model="oa/oa-model", max_tokens=2,
                                               messages=[{"role": "user", "content": "hello " * 3}])
                posts = receiver.wait_until(lambda got: len(at_threshold(got, 50)) >= 2, timeout=60)
                log = gateway.log()
        finally:
            worker.stop()
        worker_log = (tmp_path / "worker.log").read_text()
        half = at_threshold(posts, 50)
        assert len(half) == 2, f"{log}\n{worker_log}"
        first = json.loads(half[0].body)
        assert first["scope"]["name"] == "spender"
        assert half[0].headers["x-gomodel-alert-id"] == half[1].headers["x-gomodel-alert-id"]  # the retry of one alert
        assert len(posts) == 2
        assert all(verified(p.headers["x-gomodel-signature"], p.body) for p in posts)
        assert "routing.tasks.deliver_budget_alert" in worker_log
        assert "delivering from this process" not in log  # the broker took it: the worker posted
        deadline = time.monotonic() + 20
        while True:
            with psycopg.connect(url) as conn:
                rows = conn.execute("SELECT threshold, delivery, attempts FROM audit_budgetalert "
                                    "WHERE threshold = 50").fetchall()
            if rows == [(50, "delivered", 2)] or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert rows == [(50, "delivered", 2)]
