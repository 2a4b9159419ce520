"""Limits and shared health across the three replicas, through HAProxy:

- a key with ``rpm 30`` gets exactly 30 answers and 429s after, whichever replica serves each request;
- a budget is never exceeded by more than the documented bound: the requests in flight when the spend was last
  below it, each at most what one request costs (docs/governance.md);
- a target that answered 401 on one replica gets no request from any replica (nor from that replica's other
  worker) one second later: the simulator records every request that reached it.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.cluster.cluster import MASTER_KEY, Answer, Cluster, Replica, chat_body, request

pytestmark = [pytest.mark.slow, pytest.mark.services]

RPM = 30
BUDGET_USD = 1.0
BUDGET_CLIENTS = 6  # requests in flight at most, over all replicas together
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


def test_a_budget_is_exceeded_by_at_most_the_requests_in_flight(gomodel_cluster: Cluster) -> None:
    cluster = gomodel_cluster
    key = cluster.create_key("cluster-budget", "--budget-usd", f"{BUDGET_USD:g}", "--budget-period", "total")

    async def client(answers: list[Answer]) -> None:
        while True:
            answer = await request(cluster.port, "POST", "/v1/chat/completions", chat_body("sim/pricey"), key=key)
            answers.append(answer)
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
    costs = [float(a.headers["x-gomodel-cost-usd"]) for a in ok]
    spent = sum(costs)
    most = max(costs)
    bound = BUDGET_CLIENTS * most
    print(f"budget {BUDGET_USD:g} USD: {len(ok)} answers spent {spent:.4f} USD over "
          f"{len({a.served_by for a in ok})} replicas (bound {BUDGET_USD + bound:.4f}: "
          f"{BUDGET_CLIENTS} in flight x {most:.4f})")
    assert spent >= BUDGET_USD  # refused only once the budget was spent
    assert cluster.metric("gomodel_spend_usd_total", key="cluster-budget") == pytest.approx(spent)
    assert spent <= BUDGET_USD + bound
    assert {a.served_by for a in ok} == {r.name for r in cluster.replicas}


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
