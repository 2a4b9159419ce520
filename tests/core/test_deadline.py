"""One deadline per request: which budget wins, remaining time, and whether an attempt may launch."""

from __future__ import annotations

import pytest

from routing.core.deadline import AttemptAllowance, Deadline, DeadlineHeaderError, deadline_ms


@pytest.mark.parametrize(
    ("header", "contract_ms", "expected"),
    [
        (None, None, 120_000),  # the default
        (None, 8_000, 8_000),  # the contract
        ("5000", None, 5_000),  # the header
        ("5000", 8_000, 5_000),  # a client may ask for less than its contract allows ...
        ("30000", 8_000, 8_000),  # ... never for more
        (" 250 ", None, 250),
        ("0700", None, 700),
        ("99999999999", None, 3_600_000),  # clamped to an hour
        ("1" + "0" * 40, None, 3_600_000),  # absurdly long: clamped, not parsed
    ],
)
def test_it_picks_the_tightest_budget(header: str | None, contract_ms: int | None, expected: int) -> None:
    assert deadline_ms(header=header, contract_ms=contract_ms, default_ms=120_000) == expected


@pytest.mark.parametrize("header", ["", "0", "000", "-5", "1.5", "abc", "5s", "١٢٣", "1e3"])
def test_it_refuses_a_malformed_deadline_header(header: str) -> None:
    with pytest.raises(DeadlineHeaderError, match="X-GoModel-Deadline-Ms"):
        deadline_ms(header=header, contract_ms=None, default_ms=1000)


def test_it_fixes_the_deadline_at_entry() -> None:
    deadline = Deadline.start(100.0, header="8000", default_ms=120_000)
    assert deadline.at == pytest.approx(108.0)
    assert deadline.remaining(100.0) == pytest.approx(8.0)
    assert deadline.remaining(105.5) == pytest.approx(2.5)
    assert deadline.remaining(200.0) == 0.0  # never negative
    assert not deadline.expired(107.999)
    assert deadline.expired(108.0)


def test_it_gives_each_attempt_only_what_remains() -> None:
    deadline = Deadline(at=10.0)
    assert deadline.attempt_timeout(4.0) == pytest.approx(6.0)
    assert deadline.attempt_timeout(9.5) == pytest.approx(0.5)


def test_it_launches_only_an_attempt_that_can_finish() -> None:
    deadline = Deadline(at=10.0)
    allowance = AttemptAllowance(connect_s=0.1, generation_s=2.0, validation_s=0.05)
    assert allowance.total == pytest.approx(2.15)
    assert deadline.can_launch(7.85, allowance)  # exactly enough
    assert not deadline.can_launch(7.86, allowance)
    assert deadline.can_launch(0.0, 9.9)  # a plain number of seconds works too
    assert not deadline.can_launch(10.0, 0.0)  # nothing left: not even a free attempt


def test_it_takes_generation_time_from_the_measured_latency() -> None:
    measured = AttemptAllowance.for_target(3.2, connect_s=0.2, validation_s=0.1)
    assert (measured.connect_s, measured.generation_s, measured.validation_s) == (0.2, 3.2, 0.1)
    assert measured.total == pytest.approx(3.5)


@pytest.mark.parametrize("estimate", [None, float("nan"), float("inf"), -1.0])
def test_it_gives_an_unmeasured_target_the_cold_start_allowance(estimate: float | None) -> None:
    assert AttemptAllowance.for_target(estimate, cold_start_s=1.5).generation_s == 1.5


def test_it_applies_the_seed_example_budget() -> None:
    # An 8 s deadline, a primary that took 4.5 s and failed: about 3.5 s remain, enough for a fallback
    # measured at 3.2 s, not for one measured at 3.5 s.
    deadline = Deadline.start(0.0, contract_ms=8000, default_ms=120_000)
    now = 4.5
    assert deadline.can_launch(now, AttemptAllowance.for_target(3.2, connect_s=0.1, validation_s=0.05))
    assert not deadline.can_launch(now, AttemptAllowance.for_target(3.5, connect_s=0.1, validation_s=0.05))


def test_it_refuses_a_header_deadline_too_short_for_any_attempt() -> None:
    with pytest.raises(DeadlineHeaderError, match="at least 100 ms"):
        deadline_ms(header="99", contract_ms=None, default_ms=5000)
