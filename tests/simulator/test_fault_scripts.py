"""Fault scripts: times and recovery, ordered scripts, seeded probability, which key wins, validation, reset."""

from __future__ import annotations

from typing import Any

import httpx2 as httpx
import pytest

from routing.simulator import FaultError, SimulatorServer
from routing.simulator.faults import FaultBook, parse_fault, parse_script
from tests.simulator.wire_helpers import AZURE_PATH, request_for


def statuses(client: httpx.Client, count: int, wire: str = "openai", model: str = "m") -> list[int]:
    path, headers, body = request_for(wire, model)
    return [client.post(path, json=body, headers=headers).status_code for _ in range(count)]


def test_a_fault_with_times_applies_that_often_then_the_model_recovers(sim: SimulatorServer,
                                                                        client: httpx.Client) -> None:
    sim.set_fault("m", {"kind": "status", "status": 503, "times": 2})

    assert statuses(client, 4) == [503, 503, 200, 200]
    assert sim.faults() == {}


def test_a_fault_without_times_applies_forever(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("m", {"kind": "status", "status": 500})

    assert statuses(client, 5) == [500] * 5


def test_a_script_runs_its_faults_in_order(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("m", [
        {"kind": "rate_limit", "times": 2},
        {"kind": "status", "status": 502, "times": 1},
        {"kind": "context_overflow", "times": 1},
    ])

    assert statuses(client, 6) == [429, 429, 502, 400, 200, 200]


def test_faults_apply_only_to_their_model(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("broken", {"kind": "status", "status": 500})

    assert statuses(client, 2, model="healthy") == [200, 200]
    assert statuses(client, 1, model="broken") == [500]


def test_the_most_specific_key_wins_path_then_deployment_then_model_then_star(sim: SimulatorServer,
                                                                             client: httpx.Client) -> None:
    path = AZURE_PATH.format(deployment="dep").split("?")[0]
    sim.set_fault("*", {"kind": "status", "status": 500})
    sim.set_fault("gpt-test", {"kind": "status", "status": 502})
    sim.set_fault("dep", {"kind": "status", "status": 503})
    sim.set_fault(path, {"kind": "status", "status": 529})

    assert statuses(client, 1, "azure", "dep") == [529]
    sim.clear_faults(path)
    assert statuses(client, 1, "azure", "dep") == [503]
    assert statuses(client, 1, "openai", "gpt-test") == [502]
    assert statuses(client, 1, "anthropic", "anything-else") == [500]


def test_clear_faults_removes_one_key_or_all(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("a", {"kind": "status", "status": 500})
    sim.set_fault("b", {"kind": "status", "status": 500})

    sim.clear_faults("a")
    assert statuses(client, 1, model="a") == [200]
    assert statuses(client, 1, model="b") == [500]
    sim.clear_faults()
    assert statuses(client, 1, model="b") == [200]


def test_a_probability_follows_the_seeded_generator() -> None:
    def pattern(seed: int) -> list[bool]:
        book = FaultBook(seed)
        book.set("m", [parse_fault({"kind": "empty", "probability": 0.3})])
        return [book.draw(["m"]) is not None for _ in range(2000)]

    first, again, other = pattern(11), pattern(11), pattern(12)

    assert first == again  # the same seed replays the same failures
    assert first != other
    assert abs(sum(first) / len(first) - 0.3) < 0.04  # 2,000 draws: well within 4 points of 30 %


def test_a_probability_miss_does_not_consume_times() -> None:
    book = FaultBook(3)
    book.set("m", [parse_fault({"kind": "empty", "probability": 0.5, "times": 3})])

    hits = sum(book.draw(["m"]) is not None for _ in range(200))

    assert hits == 3


def test_reset_replays_the_same_probability_pattern(sim: SimulatorServer, client: httpx.Client) -> None:
    sim.set_fault("m", {"kind": "status", "status": 503, "probability": 0.5})
    first = statuses(client, 20)
    sim.reset()
    sim.set_fault("m", {"kind": "status", "status": 503, "probability": 0.5})

    assert statuses(client, 20) == first
    assert set(first) == {200, 503}


def test_configured_faults_apply_from_the_start_and_come_back_on_reset() -> None:
    config = {"models": {"flaky": {"faults": [{"kind": "status", "status": 503, "times": 1}]}},
              "faults": {"other": {"kind": "rate_limit", "times": 1}}}
    with SimulatorServer(config) as sim, httpx.Client(base_url=sim.base_url) as http:
        first = statuses(http, 2, model="flaky")
        other = statuses(http, 2, model="other")
        sim.reset()
        again = statuses(http, 1, model="flaky")

    assert first == [503, 200]
    assert other == [429, 200]
    assert again == [503]


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ({"kind": "explode"}, "fault.kind: unknown fault kind 'explode'"),
        ({"kind": "status"}, "fault.status: required for kind 'status'"),
        ({"kind": "status", "status": 200}, "fault.status: expected an HTTP error status 400-599"),
        ({"kind": "timeout", "seconds": -1}, "fault.seconds: expected a number >= 0"),
        ({"kind": "stream_cut", "after_chunks": 1.5}, "fault.after_chunks: expected an integer >= 0"),
        ({"kind": "empty", "times": 0}, "fault.times: expected an integer >= 1"),
        ({"kind": "empty", "probability": 1.5}, "fault.probability: expected a number between 0 and 1"),
        ({"kind": "empty", "status": 500}, "fault.status: not a parameter of 'empty'"),
        ("rate_limit", "expected a fault mapping or a list"),
        ([], "an empty list of faults"),
    ],
)
def test_it_refuses_a_bad_fault_naming_the_field(fault: Any, message: str) -> None:
    with pytest.raises(FaultError) as error:
        parse_script(fault)

    assert message in str(error.value)


def test_a_fault_lists_every_parameter_with_its_default() -> None:
    fault = parse_fault({"kind": "rate_limit", "times": 2})

    assert fault.to_dict() == {"kind": "rate_limit", "retry_after": 1.0, "retry_after_ms": None,
                               "insufficient_quota": False, "message": None, "times": 2}
