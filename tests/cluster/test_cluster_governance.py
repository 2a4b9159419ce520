"""Limits and shared health across the three replicas, through HAProxy:

- a key with ``rpm 30`` gets exactly 30 answers and 429s after, whichever replica serves each request;
- a budget is never exceeded, however many requests are in flight on however many replicas: each is admitted
  only while the spend, the reservations in flight and its own reservation fit (docs/governance.md);
- a model with the provider's ``rpm 3`` gets exactly 3 requests from a burst spread over every replica;
- a target that answered 401 on one replica gets no request from any replica (nor from that replica's other
  worker) one second later: the simulator records every request that reached it.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.cluster.cluster import MASTER_KEY, METERED_RPM, PRICEY_PRICE, Answer, Cluster, Replica, chat_body, request

pytestmark = [pytest.mark.slow, pytest.mark.services]

RPM = 30
BUDGET_USD = 1.0
BUDGET_CLIENTS = 12  # requests in flight at once, over all replicas together
MAX_TOKENS = 60  # what each budget request may produce: `pricey` answers with about 40 tokens
LOCKOUT_PROPAGATION_S = 1.0  # the promise: a lockout reaches every replica within one second


async def burst(port: int, key: str, count: int, model: str = "sim/steady") -> list[Answer]:
    """``count`` requests sent at once."""
    return list(await asyncio.gather(*(request(port, "POST", "/v1/chat/completions", chat_body(model), key=key)
                                       for _ in range(count))))


def test_a_key_with_rpm_30_gets_exactly_30_answers_whichever_replica_serves_them(gomodel_cluster: Cluster) -> None:
    cluster = gomodel_cluster
    key = cluster.create_key("cluster-rpm", "--rpm", str(RPM))

    answers = asyncio.run(burst(cluster.port, key, 2 * RPM))
    ok = [a for a in answers if a.status == 200]
    refused = [a for a in answers if a.status != 200]
    assert len(ok) == RPM, sorted(str((a.status, a.error_code)) for a in answers)
    assert {a.served_by for a in answers} == {r.name for r in cluster.replicas}
    assert len({a.served_by for a in ok}) >= 2  # the 30 were admitted by several replicas together
    assert {(a.status, a.error_code) for a in refused} == {(429, "rate_limit_exceeded")}
    assert all(int(a.headers["retry-after"]) >= 1 for a in refused)
    assert {a.headers.get("x-ratelimit-limit-requests") for a in ok} == {str(RPM)}

    # The minute is not over: whichever replica a later request reaches, it is refused.
    later = asyncio.run(burst(cluster.port, key, 3 * len(cluster.replicas)))
    assert {(a.status, a.error_code) for a in later} == {(429, "rate_limit_exceeded")}
    assert {a.served_by for a in refused + later} == {r.name for r in cluster.replicas}
    # What the dashboard's "Limit rejections" panel sums over the replicas.
    assert cluster.metric("gomodel_limit_rejections_total", key="cluster-rpm", limit="rpm") == len(refused + later)


def test_a_budget_is_never_exceeded_by_requests_in_flight_on_every_replica(gomodel_cluster: Cluster) -> None:
    cluster = gomodel_cluster
    key = cluster.create_key("cluster-budget", "--budget-usd", f"{BUDGET_USD:g}", "--budget-period", "total")
    body = chat_body("sim/pricey", max_tokens=MAX_TOKENS)

    async def client(answers: list[Answer]) -> None:
        while True:
            answer = await request(cluster.port, "POST", "/v1/chat/completions", body, key=key)
            answers.append(answer)
            if answer.status == 429 and answer.headers.get("retry-after") == "1":
                await asyncio.sleep(0.05)  # refused beside the reservations in flight: room may come back
                continue
            if answer.status != 200:
                return

    async def spend_it() -> list[Answer]:
        answers: list[Answer] = []
        await asyncio.gather(*(client(answers) for _ in range(BUDGET_CLIENTS)))
        return answers

    answers = asyncio.run(spend_it())
    ok = [a for a in answers if a.status == 200]
    refused = [a for a in answers if a.status != 200]
    assert {(a.status, a.error_code) for a in refused} == {(429, "budget_exceeded")}
    spent = sum(float(a.headers["x-gomodel-cost-usd"]) for a in ok)
    # The most one request may cost: its input estimate (with room to spare) and MAX_TOKENS at the model's price.
    reservation = (len(body["messages"][0]["content"]) + MAX_TOKENS + 20) * PRICEY_PRICE / 1_000_000
    print(f"budget {BUDGET_USD:g} USD: {len(ok)} answers spent {spent:.4f} USD over "
          f"{len({a.served_by for a in ok})} replicas with {BUDGET_CLIENTS} clients in flight "
          f"({len(refused)} refusals)")
    assert spent <= BUDGET_USD + 1e-9  # never past the budget, whatever the concurrency
    assert spent >= BUDGET_USD - reservation  # refused only once less than a request's reservation was left
    assert cluster.metric("gomodel_spend_usd_total", key="cluster-budget") == pytest.approx(spent)
    assert {a.served_by for a in ok} == {r.name for r in cluster.replicas}


def test_a_providers_rpm_holds_exactly_over_every_replica(gomodel_cluster: Cluster) -> None:
    """A burst of four times the provider's rpm through the balancer: exactly rpm requests reach the provider,
    whichever replicas they land on; the rest are told when the provider's minute has room again."""
    cluster = gomodel_cluster
    before = len(cluster.sim.received(model="metered"))
    answers = asyncio.run(burst(cluster.port, MASTER_KEY, 4 * METERED_RPM, model="sim/metered"))
    ok = [a for a in answers if a.status == 200]
    refused = [a for a in answers if a.status != 200]
    assert len(ok) == METERED_RPM, sorted(str((a.status, a.error_code)) for a in answers)
    assert len(cluster.sim.received(model="metered")) - before == METERED_RPM
    assert {(a.status, a.error_code) for a in refused} == {(503, "provider_limit_reached")}
    assert all(int(a.headers["retry-after"]) >= 1 for a in refused)
    assert len({a.served_by for a in answers}) >= 2  # the burst was spread: the count is the fleet's, not one's


def test_a_target_that_answered_401_on_one_replica_gets_nothing_from_the_others_a_second_later(
    gomodel_cluster: Cluster,
) -> None:
    cluster = gomodel_cluster
    sim = cluster.sim
    first: Replica = cluster.replicas[0]
    # The next request to `locked` gets a 401; after it, `locked` would answer normally to whoever still calls.
    sim.set_fault("locked", {"kind": "status", "status": 401, "times": 1})
    before = len(sim.received(model="locked"))

    answer = asyncio.run(request(first.port, "POST", "/v1/chat/completions", chat_body("guarded"), key=MASTER_KEY))
    assert answer.status == 200, answer.body
    assert answer.headers["x-gomodel-target"] == "sim/spare"  # the 401, then the fallback
    assert len(sim.received(model="locked")) == before + 1
    time.sleep(LOCKOUT_PROPAGATION_S)  # the promised propagation time, then every replica must know

    async def through_the_balancer() -> list[Answer]:
        answers: list[Answer] = []
        while not all(sum(a.served_by == r.name for a in answers) >= 4 for r in cluster.replicas):
            answers += await asyncio.gather(*(
                request(cluster.port, "POST", "/v1/chat/completions", chat_body("guarded"), key=MASTER_KEY)
                for _ in range(6)))
            assert len(answers) < 200, "HAProxy never spread the requests over every replica"
        return answers

    answers = asyncio.run(through_the_balancer())
    assert {(a.status, a.headers.get("x-gomodel-target")) for a in answers} == {(200, "sim/spare")}
    assert len(sim.received(model="locked")) == before + 1, "a replica sent a request to the locked-out target"
