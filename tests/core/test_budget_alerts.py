"""Budget alert arithmetic, documents and signatures (routing.core.budget_alerts): pure, the time a parameter."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from routing.core.budget_alerts import (
    BudgetCrossing,
    alert_document,
    alert_levels,
    crossed,
    encode_body,
    parse_thresholds,
    retry_delay,
    signature_header,
    verify_signature,
)
from routing.core.limits import Limits, LimitScope

NOW = 1_796_195_000.0  # 2026-12-02 07:03:20 UTC


@pytest.mark.parametrize(("text", "thresholds"), [
    ("50,80,100", (50, 80, 100)), ("100, 50 ,80", (50, 80, 100)), ("75%,75", (75,)), ("", ()), (" , ", ()),
])
def test_it_reads_thresholds_as_sorted_distinct_percentages(text: str, thresholds: tuple[int, ...]) -> None:
    assert parse_thresholds(text) == thresholds


@pytest.mark.parametrize("text", ["0", "101", "50.5", "-10", "half"])
def test_it_refuses_a_threshold_outside_1_to_100(text: str) -> None:
    with pytest.raises(ValueError, match="whole percentages from 1 to 100"):
        parse_thresholds(text)


def test_levels_round_up_so_a_threshold_is_never_crossed_early() -> None:
    assert alert_levels(3, (50, 100)) == (2, 3)
    assert alert_levels(1_000, (50, 80, 100)) == (500, 800, 1_000)
    assert alert_levels(0, (50,)) == (0,)


@pytest.mark.parametrize(("before", "after", "hit"), [
    (0, 499, ()), (0, 500, (50,)), (499, 500, (50,)), (500, 799, ()), (500, 800, (80,)), (0, 2_000, (50, 80, 100)),
    (1_000, 1_500, ()), (0, 0, ()),
])
def test_a_settlement_crosses_the_levels_it_carries_the_spend_to_or_past(before: int, after: int,
                                                                         hit: tuple[int, ...]) -> None:
    thresholds = (50, 80, 100)
    assert crossed(alert_levels(1_000, thresholds), thresholds, before, after) == hit


def test_a_zero_budget_is_never_crossed() -> None:
    assert crossed(alert_levels(0, (50, 100)), (50, 100), 0, 10) == ()


def document(period: str = "day") -> dict[str, object]:
    scope = LimitScope("team", "research", "team:research", Limits(budget_usd=500, budget_period=period), "research")
    period_id = "total" if period == "total" else "day:2026-12-02"
    return alert_document(BudgetCrossing(scope, period_id, 80, 400_500_000_000, NOW), "id-1")


def test_the_document_names_the_scope_budget_and_spend() -> None:
    assert document() == {
        "type": "budget.threshold_crossed", "id": "id-1", "created_at": "2026-12-02T07:03:20Z",
        "scope": {"kind": "team", "name": "research", "team": "research"}, "threshold_percent": 80,
        "budget_usd": 500.0, "budget_period": "day", "period": "day:2026-12-02",
        "period_start": "2026-12-02T00:00:00Z", "period_end": "2026-12-03T00:00:00Z", "spend_usd": 400.5,
    }
    total = document("total")
    assert (total["period"], total["period_start"], total["period_end"]) == ("total", None, None)


def test_the_signature_is_hmac_sha256_of_the_timestamp_and_the_body() -> None:
    body = encode_body(document())
    header = signature_header("s3cret-s3cret-s3cret", 1_796_195_000, body)
    expected = hmac.new(b"s3cret-s3cret-s3cret", b"1796195000." + body, hashlib.sha256).hexdigest()
    assert header == f"t=1796195000,v1={expected}"
    assert verify_signature("s3cret-s3cret-s3cret", header, body, NOW)
    assert not verify_signature("s3cret-s3cret-s3cret", header, body + b" ", NOW)  # another body
    assert not verify_signature("another-secret-here", header, body, NOW)
    assert not verify_signature("s3cret-s3cret-s3cret", header, body, NOW + 301)  # a replay, too late
    assert not verify_signature("s3cret-s3cret-s3cret", "v1=" + expected, body, NOW)  # no timestamp
    assert not verify_signature("s3cret-s3cret-s3cret", header.replace("t=1796195000", "t=1796195001"), body, NOW)


def test_the_body_is_compact_json_with_sorted_keys() -> None:
    body = encode_body({"b": 1, "a": [1, 2]})
    assert body == b'{"a":[1,2],"b":1}'


def test_the_wait_doubles_from_the_base_up_to_ten_minutes() -> None:
    assert [retry_delay(n, 10) for n in (1, 2, 3, 4)] == [10, 20, 40, 80]
    assert retry_delay(12, 10) == 600
