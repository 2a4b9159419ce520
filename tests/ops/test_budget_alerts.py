"""Budget alerts delivered to a real webhook receiver on loopback: signed (verified here with the recipe of
docs/governance.md), retried after a 500, never after a refusal, once per threshold however often it is claimed,
to the team's own webhook before the global one; and recorded in the audit trail with how delivery went.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from django.test import override_settings
from prometheus_client import REGISTRY

from audit.models import BudgetAlert
from routing import models as m
from routing.clients.limit_store import ProcessLimitStore
from routing.core.budget_alerts import BudgetCrossing
from routing.core.limits import NANOS_PER_USD, Limits, LimitScope
from routing.ops.budget_alert_delivery import deliver_step
from routing.ops.budget_alerts import BudgetAlerts, job_of
from routing.tasks import deliver_budget_alert
from tests.ops.webhook_receiver import Receiver, webhook_receiver

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]

SECRET = "test-alert-secret-0123456789"
CENT = NANOS_PER_USD // 100


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with webhook_receiver() as found:
        yield found


def fast(url: str, **extra: object) -> override_settings:
    values = {"GOMODEL_BUDGET_ALERT_WEBHOOK_URL": url, "GOMODEL_BUDGET_ALERT_SECRET": SECRET,
              "GOMODEL_BUDGET_ALERT_RETRY_BASE": 0.05, "GOMODEL_BUDGET_ALERT_RETRIES": 3, **extra}
    return override_settings(**values)


def key_scope(name: str = "ci-bot", team: str = "", usd: float = 0.10) -> LimitScope:
    return LimitScope("key", name, f"key:{uuid.uuid4().int % 10**9}", Limits(budget_usd=usd, budget_period="day"),
                      team)


def crossing(scope: LimitScope, threshold: int = 50, spend: int = 5 * CENT) -> BudgetCrossing:
    return BudgetCrossing(scope, "day:2026-12-02", threshold, spend, time.time())


def verified(header: str, body: bytes, secret: str = SECRET, tolerance_s: float = 300) -> bool:
    """A receiver's check, written from the documented recipe rather than the gateway's own code."""
    fields = dict(part.split("=", 1) for part in header.split(","))
    signed = fields["t"].encode() + b"." + body
    expected = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, fields["v1"]) and abs(time.time() - int(fields["t"])) <= tolerance_s


def eventually(predicate: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def row_of(scope: LimitScope) -> BudgetAlert:
    return BudgetAlert.objects.get(scope_ident=scope.ident)


def test_it_posts_a_signed_alert_the_receiver_verifies(receiver: Receiver) -> None:
    scope = key_scope(team="research")
    labels = {"scope": "key", "name": scope.name, "threshold": "50"}
    before = REGISTRY.get_sample_value("gomodel_budget_alerts_total", labels) or 0.0
    with fast(receiver.url):
        alerts = BudgetAlerts(use_broker=False)
        alerts.crossed(crossing(scope))
        [post] = receiver.wait_for(1)
        assert eventually(lambda: row_of(scope).delivery == BudgetAlert.DELIVERED)
    assert post.path == "/hooks/gomodel"
    assert post.headers["content-type"] == "application/json"
    assert verified(post.headers["x-gomodel-signature"], post.body)
    assert not verified(post.headers["x-gomodel-signature"], post.body.replace(b"ci-bot", b"ci-bob"))
    assert not verified(post.headers["x-gomodel-signature"], post.body, secret="another-secret-of-16")
    alert = json.loads(post.body)
    assert post.headers["x-gomodel-alert-id"] == alert["id"]
    assert alert == {
        "type": "budget.threshold_crossed", "id": alert["id"], "created_at": alert["created_at"],
        "scope": {"kind": "key", "name": "ci-bot", "team": "research"}, "threshold_percent": 50,
        "budget_usd": 0.1, "budget_period": "day", "period": "day:2026-12-02",
        "period_start": alert["period_start"], "period_end": alert["period_end"], "spend_usd": 0.05,
    }
    row = row_of(scope)
    assert (row.threshold, row.attempts, row.last_status, row.webhook) == (50, 1, 200, receiver.url.rsplit("/", 2)[0])
    assert REGISTRY.get_sample_value("gomodel_budget_alerts_total", labels) == before + 1


def test_a_receiver_that_answers_500_gets_the_alert_again(receiver: Receiver) -> None:
    receiver.statuses[:] = [500, 503]
    scope = key_scope()
    with fast(receiver.url):
        BudgetAlerts(use_broker=False).crossed(crossing(scope, 80, 8 * CENT))
        posts = receiver.wait_for(3)
        assert eventually(lambda: row_of(scope).delivery == BudgetAlert.DELIVERED)
    assert len(posts) == 3
    assert len({p.headers["x-gomodel-alert-id"] for p in posts}) == 1
    assert all(verified(p.headers["x-gomodel-signature"], p.body) for p in posts)
    row = row_of(scope)
    assert (row.attempts, row.last_status, row.last_error) == (3, 200, "")


def test_a_refusal_is_not_retried_and_the_audit_row_says_so(receiver: Receiver) -> None:
    receiver.statuses[:] = [401]
    scope = key_scope()
    with fast(receiver.url):
        BudgetAlerts(use_broker=False).crossed(crossing(scope))
        receiver.wait_for(1)
        assert eventually(lambda: row_of(scope).delivery == BudgetAlert.FAILED)
    row = row_of(scope)
    assert (row.attempts, row.last_status) == (1, 401)
    assert "answered 401" in row.last_error
    assert "/hooks" not in row.last_error  # the origin only: a path may carry the receiver's token
    assert len(receiver.posts) == 1


def test_a_receiver_out_of_reach_is_tried_the_configured_number_of_times() -> None:
    with webhook_receiver() as gone:
        url = gone.url  # closed when the block ends: nothing listens there afterwards
    scope = key_scope()
    with fast(url, GOMODEL_BUDGET_ALERT_RETRIES=2):
        job = job_of(crossing(scope))
        waits = [deliver_step(job, attempt) for attempt in range(3)]
    first, second, last = waits
    assert first is not None
    assert second is not None
    assert second > first
    assert last is None
    row = row_of(scope)
    assert (row.delivery, row.attempts, row.last_status) == (BudgetAlert.FAILED, 3, None)
    assert row.last_error


def test_a_threshold_claimed_twice_is_posted_once(receiver: Receiver) -> None:
    """Two processes that counted on their own (or one restarted behind a lagging audit trail) both claim 50%:
    the audit trail's unique row lets the first one post, and the second is dropped."""
    scope = key_scope()
    with fast(receiver.url):
        one, two = BudgetAlerts(use_broker=False), BudgetAlerts(use_broker=False)
        one.crossed(crossing(scope))
        two.crossed(crossing(scope))
        assert one.idle(30)
        assert two.idle(30)
        assert eventually(lambda: row_of(scope).delivery == BudgetAlert.DELIVERED)
    assert len(receiver.posts) == 1
    assert BudgetAlert.objects.filter(scope_ident=scope.ident).count() == 1


def test_spend_through_the_limit_store_posts_each_threshold_once(receiver: Receiver) -> None:
    scope = key_scope(usd=0.10)

    async def spend(store: ProcessLimitStore, steps: list[int]) -> None:
        for i, nanos in enumerate(steps):
            admission = await store.admit((scope,), f"r{i}")
            store.settle(admission, tokens=1, spend_nanos=nanos)

    with fast(receiver.url):
        alerts = BudgetAlerts(use_broker=False)
        store = ProcessLimitStore(alert_thresholds=(50, 80, 100), on_crossing=alerts.crossed)
        asyncio.run(spend(store, [3 * CENT, 3 * CENT, 1 * CENT, 2 * CENT, 1 * CENT]))
        posts = receiver.wait_for(3)
        assert alerts.idle(30)
        assert eventually(lambda: BudgetAlert.objects.filter(delivery=BudgetAlert.DELIVERED).count() == 3)
    assert sorted(json.loads(p.body)["threshold_percent"] for p in posts) == [50, 80, 100]
    assert len(receiver.posts) == 3


def test_a_team_webhook_gets_its_alerts_before_the_global_one(receiver: Receiver) -> None:
    with webhook_receiver(path="/team") as team_receiver:
        m.Team.objects.create(name="research", budget_usd=1, alert_webhook_url=team_receiver.url)
        scope = LimitScope("team", "research", "team:research", Limits(budget_usd=1.0), "research")
        member = key_scope(team="research")
        loner = key_scope(name="loner")
        with fast(receiver.url):
            alerts = BudgetAlerts(use_broker=False)
            for each in (scope, member, loner):
                alerts.crossed(crossing(each))
            team_receiver.wait_for(2)
            receiver.wait_for(1)
            assert alerts.idle(30)
    assert sorted(json.loads(p.body)["scope"]["name"] for p in team_receiver.posts) == ["ci-bot", "research"]
    assert [json.loads(p.body)["scope"]["name"] for p in receiver.posts] == ["loner"]


def test_without_a_webhook_the_alert_is_recorded_and_nothing_posted() -> None:
    scope = key_scope()
    with fast(""):
        assert deliver_step(job_of(crossing(scope)), 0) is None
    assert row_of(scope).delivery == BudgetAlert.NO_WEBHOOK


def test_without_a_secret_nothing_is_posted_unsigned(receiver: Receiver) -> None:
    m.Team.objects.create(name="unsigned", alert_webhook_url=receiver.url)
    scope = key_scope(team="unsigned")
    with override_settings(GOMODEL_BUDGET_ALERT_WEBHOOK_URL="", GOMODEL_BUDGET_ALERT_SECRET=""):
        assert deliver_step(job_of(crossing(scope)), 0) is None
    row = row_of(scope)
    assert row.delivery == BudgetAlert.FAILED
    assert "GOMODEL_BUDGET_ALERT_SECRET" in row.last_error
    assert receiver.posts == []


def test_the_celery_task_records_posts_and_retries(receiver: Receiver) -> None:
    """The task a worker runs when a broker is configured (run eagerly here: its retries run at once)."""
    receiver.statuses[:] = [500]
    scope = key_scope()
    job = job_of(crossing(scope, 100, 10 * CENT))
    with fast(receiver.url):
        deliver_budget_alert.apply(args=[job])
        deliver_budget_alert.apply(args=[job])  # a redelivered message: already delivered, nothing posted
    assert len(receiver.posts) == 2
    assert all(verified(p.headers["x-gomodel-signature"], p.body) for p in receiver.posts)
    row = row_of(scope)
    assert (row.delivery, row.attempts, row.threshold) == (BudgetAlert.DELIVERED, 2, 100)
